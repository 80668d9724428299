package loadgen

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
	"github.com/wirelens/wirelens/services/internal/grpcserver"
	"github.com/wirelens/wirelens/services/internal/grpcweb"
	"github.com/wirelens/wirelens/services/internal/hello"
	"github.com/wirelens/wirelens/services/internal/restserver"
)

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-[0-9a-f]{16}-01$`)

// fakeEnvoy stands in for Envoy's codec-AUTO listener: it routes gRPC to a
// grpc-go server, gRPC-Web to a small in-process bridge, and the rest to the
// REST handler, and records every traceparent it sees.
type fakeEnvoy struct {
	rest, grpc http.Handler
	webStatus  string // grpc-status the gRPC-Web bridge answers

	mu     sync.Mutex
	traces map[string]string // trace id -> content type
}

func (f *fakeEnvoy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	if m := traceparentRE.FindStringSubmatch(r.Header.Get("Traceparent")); m != nil {
		f.mu.Lock()
		f.traces[m[1]] = ct
		f.mu.Unlock()
	}
	switch {
	case strings.HasPrefix(ct, "application/grpc-web"):
		f.grpcWeb(w, r, ct == grpcweb.ContentTypeText)
	case strings.HasPrefix(ct, "application/grpc"):
		f.grpc.ServeHTTP(w, r)
	default:
		f.rest.ServeHTTP(w, r)
	}
}

func (f *fakeEnvoy) grpcWeb(w http.ResponseWriter, r *http.Request, text bool) {
	body, _ := io.ReadAll(r.Body)
	if text {
		body, _ = grpcweb.DecodeText(body)
	}
	res, err := grpcweb.DecodeResponse(body) // request framing is the same
	if err != nil || len(res.Messages) != 1 || r.Header.Get("X-Grpc-Web") != "1" {
		http.Error(w, "bad grpc-web request", http.StatusBadRequest)
		return
	}
	var req wirelensv1.HelloRequest
	if err := proto.Unmarshal(res.Messages[0], &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	srv := grpcserver.NewHelloServer(hello.New())
	var rep proto.Message
	switch r.URL.Path {
	case "/wirelens.v1.Hello/SayHello":
		rep, err = srv.SayHello(r.Context(), &req)
	case "/wirelens.v1.Hello/SayHelloBig":
		rep, err = srv.SayHelloBig(r.Context(), &req)
	}
	if err != nil || rep == nil {
		http.Error(w, "no such method", http.StatusNotFound)
		return
	}
	msg, _ := proto.Marshal(rep)
	out := grpcweb.EncodeMessage(msg)
	out = append(out, grpcweb.EncodeTrailers(http.Header{"Grpc-Status": {f.webStatus}, "Grpc-Message": {"boom%21"}})...)
	if text {
		out = append(grpcweb.EncodeText(out[:len(out)/2]), grpcweb.EncodeText(out[len(out)/2:])...)
	}
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	_, _ = w.Write(out)
}

func startFakeEnvoy(t *testing.T, webStatus string) (*fakeEnvoy, string) {
	t.Helper()
	rest, err := restserver.NewHandler(hello.New())
	if err != nil {
		t.Fatal(err)
	}
	grpcSrv, _ := grpcserver.New(hello.New())
	f := &fakeEnvoy{rest: rest, grpc: grpcSrv, webStatus: webStatus, traces: map[string]string{}}
	ts := httptest.NewUnstartedServer(f)
	ts.Config = restserver.NewServer("", f) // HTTP/1.1 + h2c, like codec AUTO
	ts.Start()
	t.Cleanup(func() { ts.Close(); grpcSrv.Stop() })
	return f, strings.TrimPrefix(ts.URL, "http://")
}

func TestRunAllProtocols(t *testing.T) {
	f, target := startFakeEnvoy(t, "0")
	for _, proto := range Protocols() {
		for _, op := range Operations() {
			t.Run(proto+"/"+op, func(t *testing.T) {
				var ids bytes.Buffer
				sum, err := Run(context.Background(), Config{
					Target: target, Protocol: proto, Operation: op, Name: "wirelens",
					N: 7, Concurrency: 3, Timeout: 20 * time.Second, TraceIDs: &ids,
				})
				if err != nil {
					t.Fatal(err)
				}
				if sum.Calls != 7 || sum.OK != 7 || sum.Errors != 0 || sum.Protocol != proto || sum.Operation != op {
					t.Fatalf("summary = %+v", sum)
				}
				if sum.P50Ms <= 0 || sum.P99Ms < sum.P50Ms {
					t.Fatalf("latencies = %+v", sum)
				}
				lines := strings.Split(strings.TrimSuffix(ids.String(), "\n"), "\n")
				if len(lines) != 7 {
					t.Fatalf("trace id lines = %q", lines)
				}
				for _, l := range lines {
					p, id, ok := strings.Cut(l, "\t")
					f.mu.Lock()
					_, seen := f.traces[id]
					f.mu.Unlock()
					if !ok || p != proto || len(id) != 32 || !seen {
						t.Fatalf("trace line %q: protocol %q id %q seen by server %v", l, p, id, seen)
					}
				}
			})
		}
	}
}

func TestRunReportsGRPCWebStatus(t *testing.T) {
	_, target := startFakeEnvoy(t, "13")
	sum, err := Run(context.Background(), Config{
		Target: target, Protocol: ProtocolGRPCWeb, Operation: "hello.SayHello", Name: "x",
		N: 3, Concurrency: 1, Timeout: 10 * time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), "grpc-status 13 (Internal): boom!") {
		t.Fatalf("err = %v", err)
	}
	if sum.Calls != 3 || sum.Errors != 3 || sum.OK != 0 {
		t.Fatalf("summary = %+v", sum)
	}
}

func TestRunConnectionRefused(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	target := strings.TrimPrefix(ts.URL, "http://")
	ts.Close() // nothing listens there any more
	sum, err := Run(context.Background(), Config{
		Target: target, Protocol: ProtocolREST, Operation: "hello.SayHello",
		N: 2, Concurrency: 1, Timeout: 10 * time.Second,
	})
	if err == nil || sum.Errors != 2 {
		t.Fatalf("summary %+v err %v", sum, err)
	}
}

func TestRunTimeoutBoundsTheRun(t *testing.T) {
	block := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer ts.Close()
	defer close(block)
	start := time.Now()
	sum, err := Run(context.Background(), Config{
		Target: ts.URL, Protocol: ProtocolREST, Operation: "hello.SayHello",
		N: 1000, Concurrency: 2, Timeout: 200 * time.Millisecond,
	})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
	if sum.Calls != 2 || sum.Errors != 2 {
		t.Fatalf("summary = %+v", sum)
	}
}

func TestValidate(t *testing.T) {
	cfg := Config{Target: "", Protocol: "soap", N: 0, Concurrency: 0, Timeout: 0}
	err := cfg.Validate()
	for _, want := range []string{"-target", "-protocol", "-operation", "-n", "-concurrency", "-timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want mention of %s", err, want)
		}
	}
	if _, err := Run(context.Background(), Config{Target: "127.0.0.1:1", Protocol: "rest", Operation: "hello.Nope",
		N: 1, Concurrency: 1, Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), "-operation must be one of") {
		t.Errorf("unknown operation: %v", err)
	}
}

func TestTraceparent(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		tp, id := newTraceparent()
		m := traceparentRE.FindStringSubmatch(tp)
		if m == nil || m[1] != id || seen[id] {
			t.Fatalf("traceparent %q id %q", tp, id)
		}
		seen[id] = true
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if p := percentile(d, 50); p != 50*time.Millisecond {
		t.Fatalf("p50 = %s", p)
	}
	if p := percentile(d, 99); p != 99*time.Millisecond {
		t.Fatalf("p99 = %s", p)
	}
	if p := percentile(d[:1], 99); p != time.Millisecond {
		t.Fatalf("p99 of one = %s", p)
	}
	if p := percentile(nil, 50); p != 0 {
		t.Fatalf("p50 of none = %s", p)
	}
}
