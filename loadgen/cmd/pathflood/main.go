// Command pathflood sends calls to distinct random paths through Envoy, the
// way a hostile or careless client invents paths: REST calls over HTTP/1.1
// keep-alive connections and gRPC-shaped calls (POST /x.Y/<random>,
// content-type application/grpc) over cleartext HTTP/2, several streams at a
// time on each connection. It checks that wirelens keeps its dimensions
// bounded however many paths clients make up (tests/e2e/test_cardinality.py).
//
//	pathflood -target 127.0.0.1:10000 -calls 100000 -run-id <id>
//
// Every path is distinct (a call number is part of it). One REST and one gRPC
// call carry a path of -long-path-bytes. It prints one JSON line: calls sent
// per kind and per method, answers per HTTP status, transport errors, elapsed
// seconds. It exits 1 if any call got no HTTP answer.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// restMethods are the methods the REST calls cycle through: standard ones and
// PURGE, which Envoy's HTTP/1 codec accepts but OpenTelemetry does not know
// (recorded as _OTHER). Invented methods (BREW, or a lower-case "get") are
// left out: the codec answers them 400 before any filter runs, so they are
// no row to count.
var restMethods = []string{"GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "PURGE"}

// emptyGRPCMessage is one uncompressed gRPC frame of length 0.
var emptyGRPCMessage = []byte{0, 0, 0, 0, 0}

const pathAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."

type config struct {
	target        string
	calls         int
	grpcShare     float64
	restConns     int
	grpcStreams   int
	runID         string
	longPathBytes int
	seed          uint64
	timeout       time.Duration
}

// call is one request to send: its kind, method and path.
type call struct {
	grpc   bool
	method string
	path   string
}

type summary struct {
	Calls          int            `json:"calls"`
	REST           int            `json:"rest"`
	GRPC           int            `json:"grpc"`
	Methods        map[string]int `json:"methods"`
	Answered       int64          `json:"answered"`
	Statuses       map[string]int `json:"statuses"`
	Errors         int64          `json:"errors"`
	FirstError     string         `json:"first_error,omitempty"`
	ElapsedSeconds float64        `json:"elapsed_s"`
	CallsPerSecond float64        `json:"calls_per_s"`
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pathflood:", err)
		os.Exit(2)
	}
	sum, err := run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pathflood:", err)
		os.Exit(2)
	}
	out, err := json.Marshal(sum)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pathflood: encoding the summary:", err)
		os.Exit(2)
	}
	fmt.Println(string(out))
	if sum.Errors > 0 {
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("pathflood", flag.ContinueOnError)
	fs.StringVar(&cfg.target, "target", "", "Envoy's listener, host:port (required)")
	fs.IntVar(&cfg.calls, "calls", 100000, "calls to send, each to a path of its own")
	fs.Float64Var(&cfg.grpcShare, "grpc-share", 0.5, "share of the calls sent gRPC-shaped over HTTP/2, in [0, 1]")
	fs.IntVar(&cfg.restConns, "rest-conns", 16, "HTTP/1.1 keep-alive connections, one call in flight on each")
	fs.IntVar(&cfg.grpcStreams, "grpc-streams", 32, "gRPC-shaped calls in flight, multiplexed on HTTP/2 connections")
	fs.StringVar(&cfg.runID, "run-id", "", "x-wirelens-run header of every call")
	fs.IntVar(&cfg.longPathBytes, "long-path-bytes", 8192, "length of the one long REST path and the one long gRPC path (0: none)")
	fs.Uint64Var(&cfg.seed, "seed", uint64(time.Now().UnixNano()), "random seed of the paths")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "per-call timeout")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case cfg.target == "":
		return cfg, errors.New("-target: required (Envoy's host:port)")
	case cfg.calls < 1:
		return cfg, fmt.Errorf("-calls: must be at least 1, got %d", cfg.calls)
	case cfg.grpcShare < 0 || cfg.grpcShare > 1:
		return cfg, fmt.Errorf("-grpc-share: must be in [0, 1], got %v", cfg.grpcShare)
	case cfg.restConns < 1:
		return cfg, fmt.Errorf("-rest-conns: must be at least 1, got %d", cfg.restConns)
	case cfg.grpcStreams < 1:
		return cfg, fmt.Errorf("-grpc-streams: must be at least 1, got %d", cfg.grpcStreams)
	case cfg.longPathBytes < 0 || cfg.longPathBytes > 60*1024:
		// Envoy refuses request headers over 60 KiB by default.
		return cfg, fmt.Errorf("-long-path-bytes: must be in [0, 61440], got %d", cfg.longPathBytes)
	}
	return cfg, nil
}

// plan lists the calls: distinct paths, REST first then gRPC-shaped,
// interleaved at send time by the two worker pools.
func plan(cfg config) (rest, grpc []call) {
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15))
	nGRPC := int(float64(cfg.calls)*cfg.grpcShare + 0.5)
	for i := 0; i < cfg.calls; i++ {
		isGRPC := i < nGRPC
		// The call number makes the path unique; random text makes it look invented.
		prefix := "/r" + strconv.FormatInt(int64(i), 36) + "-"
		if isGRPC {
			prefix = "/x.Y/m" + strconv.FormatInt(int64(i), 36) + "-"
		}
		length := len(prefix) + 8 + rng.IntN(40)
		if cfg.longPathBytes > 0 && (i == 0 || i == nGRPC) {
			length = cfg.longPathBytes
		}
		path := randomPath(rng, prefix, length)
		if isGRPC {
			grpc = append(grpc, call{grpc: true, method: http.MethodPost, path: path})
		} else {
			rest = append(rest, call{method: restMethods[i%len(restMethods)], path: path})
		}
	}
	return rest, grpc
}

func randomPath(rng *rand.Rand, prefix string, length int) string {
	b := make([]byte, 0, max(length, len(prefix)))
	b = append(b, prefix...)
	for len(b) < length {
		b = append(b, pathAlphabet[rng.IntN(len(pathAlphabet))])
	}
	return string(b)
}

func run(ctx context.Context, cfg config) (summary, error) {
	rest, grpc := plan(cfg)
	restClient := &http.Client{Timeout: cfg.timeout, Transport: &http.Transport{
		MaxIdleConnsPerHost: cfg.restConns,
		MaxConnsPerHost:     cfg.restConns,
		DisableCompression:  true,
	}}
	var h2 http.Protocols
	h2.SetUnencryptedHTTP2(true)
	grpcClient := &http.Client{Timeout: cfg.timeout, Transport: &http.Transport{
		Protocols:          &h2,
		DisableCompression: true,
		// Few connections, many streams each: the multiplexing gRPC clients do.
		MaxConnsPerHost: max(cfg.grpcStreams/16, 1),
	}}
	var (
		mu       sync.Mutex
		statuses = map[string]int{}
		answered atomic.Int64
		failed   atomic.Int64
		firstErr string
	)
	record := func(status int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed.Add(1)
			if firstErr == "" {
				firstErr = err.Error()
			}
			return
		}
		answered.Add(1)
		statuses[strconv.Itoa(status)]++
	}
	start := time.Now()
	var wg sync.WaitGroup
	pool := func(calls []call, workers int, client *http.Client) {
		next := atomic.Int64{}
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= len(calls) {
						return
					}
					record(send(ctx, client, cfg, calls[i]))
				}
			}()
		}
	}
	pool(rest, cfg.restConns, restClient)
	pool(grpc, cfg.grpcStreams, grpcClient)
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	methods := map[string]int{}
	for _, c := range append(rest, grpc...) {
		methods[c.method]++
	}
	return summary{
		Calls: cfg.calls, REST: len(rest), GRPC: len(grpc), Methods: methods,
		Answered: answered.Load(), Statuses: statuses, Errors: failed.Load(), FirstError: firstErr,
		ElapsedSeconds: elapsed, CallsPerSecond: float64(cfg.calls) / elapsed,
	}, nil
}

// send makes one call and reads its answer whole (so the connection is
// reused); it returns the HTTP status, or the error that left it unanswered.
func send(ctx context.Context, client *http.Client, cfg config, c call) (int, error) {
	var body io.Reader
	if c.grpc {
		body = bytes.NewReader(emptyGRPCMessage)
	}
	// Opaque keeps the path exactly as planned (no cleaning, no escaping).
	req, err := http.NewRequestWithContext(ctx, c.method, "http://"+cfg.target+"/", body)
	if err != nil {
		return 0, fmt.Errorf("building %s %.64s: %w", c.method, c.path, err)
	}
	req.URL.Opaque = c.path
	if c.grpc {
		req.Header.Set("content-type", "application/grpc")
		req.Header.Set("te", "trailers")
	}
	if cfg.runID != "" {
		req.Header.Set("x-wirelens-run", cfg.runID)
	}
	resp, err := client.Do(req)
	if err != nil {
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			return 0, fmt.Errorf("%s %.64s: timed out after %s: %w", c.method, c.path, cfg.timeout, err)
		}
		return 0, fmt.Errorf("%s %.64s: %w", c.method, c.path, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, fmt.Errorf("%s %.64s: reading the answer: %w", c.method, c.path, err)
	}
	return resp.StatusCode, nil
}
