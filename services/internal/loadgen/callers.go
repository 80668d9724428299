package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/wirelens/wirelens/services/internal/grpcweb"
)

// maxResponseBytes bounds a response body read by the HTTP/1.1 callers.
const maxResponseBytes = 64 << 20

// RunHeader carries the run id; the wirelens Envoy config records it with every call.
const RunHeader = "x-wirelens-run"

// caller performs one call of the workload over one protocol.
type caller interface {
	call(ctx context.Context, traceparent string) error
	close() error
}

func newCaller(cfg Config, w *workload) (caller, error) {
	switch cfg.Protocol {
	case ProtocolREST:
		method, path, err := w.restRoute()
		if err != nil {
			return nil, err
		}
		return &restCaller{
			httpCaller: newHTTPCaller(cfg),
			runID:      cfg.RunID,
			method:     method,
			url:        "http://" + cfg.Target + path,
			w:          w,
		}, nil
	case ProtocolGRPC:
		conn, err := grpc.NewClient(cfg.Target,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUserAgent(userAgent))
		if err != nil {
			return nil, fmt.Errorf("creating gRPC client for %s: %w", cfg.Target, err)
		}
		return &grpcCaller{conn: conn, runID: cfg.RunID, w: w}, nil
	case ProtocolGRPCWeb, ProtocolGRPCWebText:
		msg, err := proto.Marshal(w.request)
		if err != nil {
			return nil, fmt.Errorf("encoding request: %w", err)
		}
		c := &grpcWebCaller{
			httpCaller:  newHTTPCaller(cfg),
			runID:       cfg.RunID,
			url:         "http://" + cfg.Target + w.op.GRPCPath,
			body:        grpcweb.EncodeMessage(msg),
			contentType: grpcweb.ContentTypeProto,
			w:           w,
		}
		if cfg.Protocol == ProtocolGRPCWebText {
			c.text = true
			c.body = grpcweb.EncodeText(c.body)
			c.contentType = grpcweb.ContentTypeText
		}
		return c, nil
	default:
		return nil, fmt.Errorf("unknown protocol %q", cfg.Protocol)
	}
}

// httpCaller holds an HTTP/1.1 client with one connection per worker.
type httpCaller struct {
	client *http.Client
}

func newHTTPCaller(cfg Config) httpCaller {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	tr := &http.Transport{
		Protocols:           &protocols,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        cfg.Concurrency,
		MaxIdleConnsPerHost: cfg.Concurrency,
		MaxConnsPerHost:     cfg.Concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // no Accept-Encoding: bodies stay as the services wrote them
	}
	return httpCaller{client: &http.Client{Transport: tr}}
}

func (h httpCaller) close() error {
	h.client.CloseIdleConnections()
	return nil
}

// do sends one request and returns the response with its whole body.
func (h httpCaller) do(ctx context.Context, method, url, contentType string, body []byte, extra http.Header) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", userAgent)
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return resp, nil, fmt.Errorf("reading response body: %w", err)
	}
	return resp, data, nil
}

type restCaller struct {
	httpCaller
	runID       string
	method, url string
	w           *workload
}

func (c *restCaller) call(ctx context.Context, traceparent string) error {
	resp, body, err := c.do(ctx, c.method, c.url, "application/json", c.w.requestJSON,
		withRunID(http.Header{"Traceparent": {traceparent}}, c.runID))
	if err != nil {
		return fmt.Errorf("rest %s %s: %w", c.method, c.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("rest %s %s: HTTP %d: %s", c.method, c.url, resp.StatusCode, snippet(body))
	}
	reply := c.w.newReply()
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, reply); err != nil {
		return fmt.Errorf("rest %s %s: decoding JSON reply %s: %w", c.method, c.url, snippet(body), err)
	}
	if err := c.w.check(reply); err != nil {
		return fmt.Errorf("rest %s %s: %w", c.method, c.url, err)
	}
	return nil
}

type grpcCaller struct {
	conn  *grpc.ClientConn
	runID string
	w     *workload
}

func (c *grpcCaller) call(ctx context.Context, traceparent string) error {
	ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", traceparent)
	if c.runID != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, RunHeader, c.runID)
	}
	reply := c.w.newReply()
	if err := c.conn.Invoke(ctx, c.w.op.GRPCPath, c.w.request, reply); err != nil {
		return fmt.Errorf("grpc %s: %w", c.w.op.GRPCPath, err)
	}
	if err := c.w.check(reply); err != nil {
		return fmt.Errorf("grpc %s: %w", c.w.op.GRPCPath, err)
	}
	return nil
}

func (c *grpcCaller) close() error { return c.conn.Close() }

type grpcWebCaller struct {
	httpCaller
	runID            string
	url, contentType string
	body             []byte
	text             bool
	w                *workload
}

func (c *grpcWebCaller) call(ctx context.Context, traceparent string) error {
	extra := withRunID(http.Header{
		"X-Grpc-Web":  {"1"},
		"Traceparent": {traceparent},
		"Accept":      {c.contentType},
	}, c.runID)
	resp, body, err := c.do(ctx, http.MethodPost, c.url, c.contentType, c.body, extra)
	if err != nil {
		return fmt.Errorf("grpc-web %s: %w", c.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		if gs := resp.Header.Get("Grpc-Status"); gs != "" {
			return fmt.Errorf("grpc-web %s: HTTP %d, grpc-status %s: %s", c.url, resp.StatusCode, gs, resp.Header.Get("Grpc-Message"))
		}
		return fmt.Errorf("grpc-web %s: HTTP %d: %s", c.url, resp.StatusCode, snippet(body))
	}
	if c.text {
		if body, err = grpcweb.DecodeText(body); err != nil {
			return fmt.Errorf("grpc-web %s: %w", c.url, err)
		}
	}
	r, err := grpcweb.DecodeResponse(body)
	if err != nil {
		return fmt.Errorf("grpc-web %s: %w", c.url, err)
	}
	code, msg, err := grpcweb.Status(r, resp.Header)
	if err != nil {
		return fmt.Errorf("grpc-web %s: %w", c.url, err)
	}
	if code != codes.OK {
		return fmt.Errorf("grpc-web %s: grpc-status %d (%s): %s", c.url, code, code, msg)
	}
	if len(r.Messages) != 1 {
		return fmt.Errorf("grpc-web %s: %d response messages, want 1", c.url, len(r.Messages))
	}
	reply := c.w.newReply()
	if err := proto.Unmarshal(r.Messages[0], reply); err != nil {
		return fmt.Errorf("grpc-web %s: decoding reply: %w", c.url, err)
	}
	if err := c.w.check(reply); err != nil {
		return fmt.Errorf("grpc-web %s: %w", c.url, err)
	}
	return nil
}

func snippet(b []byte) string {
	const max = 200
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}

// withRunID adds the run header when the run has an id.
func withRunID(h http.Header, runID string) http.Header {
	if runID != "" {
		h.Set(RunHeader, runID)
	}
	return h
}
