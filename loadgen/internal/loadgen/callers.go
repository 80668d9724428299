package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/wirelens/wirelens/internal/grpcweb"
	"github.com/wirelens/wirelens/internal/restapi"
)

// maxResponseBytes bounds a response body read by the HTTP/1.1 callers.
const maxResponseBytes = 64 << 20

// maxGRPCMessageBytes bounds one gRPC message received (ListProducts(10000)
// is about 5 MB).
const maxGRPCMessageBytes = 64 << 20

// RunHeader carries the run id; the wirelens Envoy config records it with every call.
const RunHeader = "x-wirelens-run"

// callStats counts the messages of one call: 1 and 1 for unary calls, the
// stream's messages for streaming ones.
type callStats struct {
	sent, received int
}

// callInfo is one call: its index i (0-based within its phase), the worker
// (user) sending it, its traceparent and run id.
type callInfo struct {
	i           int64
	worker      int
	traceparent string
	runID       string
	stack       string // x-wirelens-stack, if set
	warmup      bool
}

// caller performs one call of the workload over one protocol.
type caller interface {
	call(ctx context.Context, ci callInfo) (callStats, error)
	close() error
}

// newCaller builds the caller of w; warm is the workload of warm-up calls
// (w itself unless warm-up streams have their own length; only client and
// bidi streams, so only gRPC, differ).
func newCaller(cfg Config, w, warm *workload) (caller, error) {
	switch cfg.Protocol {
	case ProtocolREST, ProtocolRESTProto:
		return newRESTCaller(cfg, w)
	case ProtocolGRPC:
		c := &grpcCaller{w: w, warm: warm}
		for range cfg.grpcChannels() {
			conn, err := grpc.NewClient(cfg.Target,
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithUserAgent(userAgent),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxGRPCMessageBytes)))
			if err != nil {
				c.close()
				return nil, fmt.Errorf("creating gRPC client for %s: %w", cfg.Target, err)
			}
			c.conns = append(c.conns, conn)
		}
		return c, nil
	case ProtocolGRPCWeb, ProtocolGRPCWebText:
		c := &grpcWebCaller{
			httpCaller:  newHTTPCaller(cfg),
			url:         "http://" + cfg.Target + w.op.GRPCPath,
			contentType: grpcweb.ContentTypeProto,
			text:        cfg.Protocol == ProtocolGRPCWebText,
			w:           w,
		}
		if c.text {
			c.contentType = grpcweb.ContentTypeText
		}
		if !w.perCall {
			body, err := c.encode(w.request(0))
			if err != nil {
				return nil, err
			}
			c.fixedBody = body
		}
		return c, nil
	default:
		return nil, fmt.Errorf("unknown protocol %q", cfg.Protocol)
	}
}

// httpCaller holds an HTTP/1.1 client with one connection per call in
// flight (per worker, per user).
type httpCaller struct {
	client *http.Client
}

func newHTTPCaller(cfg Config) httpCaller {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	conns := cfg.connections()
	tr := &http.Transport{
		Protocols:           &protocols,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
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

// restCaller sends the operation's first google.api.http route, with a JSON
// body (rest) or a protobuf body and Accept (rest-proto).
type restCaller struct {
	httpCaller
	base     string // http://host:port
	proto    bool   // rest-proto
	method   string
	tmpl     restapi.Template
	withBody bool // body "*"; otherwise the fields go to the path and query
	w        *workload
	fixed    *restRequest // when the request does not vary between calls
}

type restRequest struct {
	url  string
	body []byte
}

func newRESTCaller(cfg Config, w *workload) (*restCaller, error) {
	if len(w.op.HTTPRules) == 0 {
		return nil, fmt.Errorf("operation %s has no google.api.http rule", w.op.Name)
	}
	rule := w.op.HTTPRules[0]
	if rule.Body != "" && rule.Body != "*" {
		return nil, fmt.Errorf("operation %s: body %q is not supported (only \"*\" or none)", w.op.Name, rule.Body)
	}
	t, err := restapi.ParseTemplate(rule.Pattern)
	if err != nil {
		return nil, fmt.Errorf("operation %s: %w", w.op.Name, err)
	}
	c := &restCaller{
		httpCaller: newHTTPCaller(cfg),
		base:       "http://" + cfg.Target,
		proto:      cfg.Protocol == ProtocolRESTProto,
		method:     rule.Method,
		tmpl:       t,
		withBody:   rule.Body == "*",
		w:          w,
	}
	if !w.perCall {
		r, err := c.build(w.request(0))
		if err != nil {
			return nil, err
		}
		c.fixed = &r
	}
	return c, nil
}

// build encodes req as a URL and a body.
func (c *restCaller) build(req proto.Message) (restRequest, error) {
	path, err := c.tmpl.Expand(req)
	if err != nil {
		return restRequest{}, fmt.Errorf("building the URL: %w", err)
	}
	r := restRequest{url: c.base + path}
	switch {
	case !c.withBody:
		q, err := restapi.Query(req, c.tmpl.Vars)
		if err != nil {
			return restRequest{}, fmt.Errorf("building the query: %w", err)
		}
		if len(q) > 0 {
			r.url += "?" + q.Encode()
		}
	case c.proto:
		r.body, err = restapi.MarshalProto(req)
	default:
		r.body, err = restapi.MarshalJSON(req)
	}
	return r, err
}

func (c *restCaller) call(ctx context.Context, ci callInfo) (callStats, error) {
	req := c.w.request(ci.i)
	r := c.fixed
	if r == nil {
		built, err := c.build(req)
		if err != nil {
			return callStats{}, err
		}
		r = &built
	}
	name := c.protocol() + " " + c.method + " " + r.url
	header := withTraceparent(http.Header{}, ci.traceparent)
	contentType := restapi.ContentTypeJSON
	if c.proto {
		// The Content-Type goes on bodiless requests too: it is how the
		// wirelens filter tells rest-proto from rest.
		contentType = restapi.ContentTypeProtobuf
		header.Set("Accept", restapi.ContentTypeProtobuf)
	}
	resp, body, err := c.do(ctx, c.method, r.url, contentType, r.body, withStack(withRunID(header, ci.runID), ci.stack))
	if err != nil {
		return callStats{sent: 1}, fmt.Errorf("%s: %w", name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return callStats{sent: 1}, fmt.Errorf("%s: HTTP %d: %s", name, resp.StatusCode, snippet(body))
	}
	reply := c.w.newReply()
	if c.proto {
		if ct := resp.Header.Get("Content-Type"); !restapi.IsProtobuf(ct) {
			return callStats{sent: 1}, fmt.Errorf("%s: answered Content-Type %q, not protobuf: %s", name, ct, snippet(body))
		}
		err = proto.Unmarshal(body, reply)
	} else {
		err = restapi.UnmarshalJSON(body, reply, true)
	}
	if err != nil {
		return callStats{sent: 1}, fmt.Errorf("%s: decoding reply %s: %w", name, snippet(body), err)
	}
	if err := c.w.check(req, reply); err != nil {
		return callStats{sent: 1, received: 1}, fmt.Errorf("%s: %w", name, err)
	}
	return callStats{sent: 1, received: 1}, nil
}

func (c *restCaller) protocol() string {
	if c.proto {
		return ProtocolRESTProto
	}
	return ProtocolREST
}

// grpcCaller sends every streaming shape over grpc-go: one channel (HTTP/2
// connection) per user in the closed model, one shared channel otherwise.
type grpcCaller struct {
	conns []*grpc.ClientConn
	w     *workload
	warm  *workload
}

// grpcCall is one call over one channel.
type grpcCall struct {
	conn *grpc.ClientConn
	w    *workload
}

func (c *grpcCaller) call(ctx context.Context, ci callInfo) (callStats, error) {
	if ci.traceparent != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "traceparent", ci.traceparent)
	}
	if ci.runID != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, RunHeader, ci.runID)
	}
	if ci.stack != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, StackHeader, ci.stack)
	}
	g := grpcCall{conn: c.conns[ci.worker%len(c.conns)], w: c.w}
	if ci.warmup {
		g.w = c.warm
	}
	var (
		st  callStats
		err error
	)
	switch g.w.op.Streaming {
	case "unary":
		st, err = g.unary(ctx, ci.i)
	case "server":
		st, err = g.serverStream(ctx, ci.i)
	case "client":
		st, err = g.clientStream(ctx, ci.i)
	case "bidi":
		if g.w.lockstep {
			st, err = g.bidiLockstep(ctx, ci.i)
		} else {
			st, err = g.bidiStream(ctx, ci.i)
		}
	default:
		err = fmt.Errorf("unknown streaming shape %q", g.w.op.Streaming)
	}
	if err != nil {
		return st, fmt.Errorf("grpc %s: %w", g.w.op.GRPCPath, err)
	}
	return st, nil
}

func (c grpcCall) unary(ctx context.Context, i int64) (callStats, error) {
	req, reply := c.w.request(i), c.w.newReply()
	if err := c.conn.Invoke(ctx, c.w.op.GRPCPath, req, reply); err != nil {
		return callStats{sent: 1}, err
	}
	return callStats{sent: 1, received: 1}, c.w.check(req, reply)
}

func (c grpcCall) serverStream(ctx context.Context, i int64) (st callStats, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, c.w.op.GRPCPath)
	if err != nil {
		return st, err
	}
	req := c.w.request(i)
	if err := stream.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return st, fmt.Errorf("sending the request: %w", err)
	}
	st.sent = 1
	if err := stream.CloseSend(); err != nil {
		return st, fmt.Errorf("closing the send side: %w", err)
	}
	for {
		reply := c.w.newReply()
		err := stream.RecvMsg(reply)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return st, fmt.Errorf("after %d replies: %w", st.received, err)
		}
		st.received++
		if err := c.w.check(req, reply); err != nil {
			return st, fmt.Errorf("reply %d: %w", st.received, err)
		}
	}
	if st.received != c.w.replies {
		return st, fmt.Errorf("%d replies, want %d", st.received, c.w.replies)
	}
	return st, nil
}

func (c grpcCall) clientStream(ctx context.Context, i int64) (st callStats, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, c.w.op.GRPCPath)
	if err != nil {
		return st, err
	}
	for j := range c.w.messages {
		if err := stream.SendMsg(c.w.message(i, j)); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server ended the call: RecvMsg returns its status
			}
			return st, fmt.Errorf("sending message %d: %w", j+1, err)
		}
		st.sent++
	}
	if err := stream.CloseSend(); err != nil {
		return st, fmt.Errorf("closing the send side: %w", err)
	}
	reply := c.w.newReply()
	if err := stream.RecvMsg(reply); err != nil {
		return st, fmt.Errorf("after %d messages: %w", st.sent, err)
	}
	st.received = 1
	return st, c.w.check(nil, reply)
}

// bidiStream sends the stream's messages from one goroutine while this one
// reads the echoes (reading only after sending would stall both sides once
// the flow-control windows fill), and checks that reply j answers message j.
func (c grpcCall) bidiStream(ctx context.Context, i int64) (st callStats, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, c.w.op.GRPCPath)
	if err != nil {
		return st, err
	}
	type sendResult struct {
		sent int
		err  error
	}
	done := make(chan sendResult, 1)
	go func() {
		var r sendResult
		defer func() { done <- r }()
		for j := range c.w.messages {
			if err := stream.SendMsg(c.w.message(i, j)); err != nil {
				if !errors.Is(err, io.EOF) { // io.EOF: the server ended the call; RecvMsg reports why
					r.err = fmt.Errorf("sending message %d: %w", j+1, err)
				}
				return
			}
			r.sent++
		}
		if err := stream.CloseSend(); err != nil {
			r.err = fmt.Errorf("closing the send side: %w", err)
		}
	}()
	var recvErr error
	for {
		reply := c.w.newReply()
		err := stream.RecvMsg(reply)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			recvErr = fmt.Errorf("after %d replies: %w", st.received, err)
			break
		}
		if st.received >= c.w.messages {
			recvErr = fmt.Errorf("more replies than the %d messages sent", c.w.messages)
			break
		}
		if err := c.w.check(c.w.message(i, st.received), reply); err != nil {
			recvErr = fmt.Errorf("reply %d: %w", st.received+1, err)
			break
		}
		st.received++
	}
	if recvErr != nil {
		cancel() // unblocks the sender
	}
	r := <-done
	st.sent = r.sent
	switch {
	case recvErr != nil:
		return st, recvErr
	case r.err != nil:
		return st, r.err
	case st.received != c.w.messages:
		return st, fmt.Errorf("%d replies to %d messages", st.received, c.w.messages)
	}
	return st, nil
}

// bidiLockstep sends message j only after reply j-1 arrived: one message
// in flight on the stream, each a round trip (a sequential client that
// keeps its stream open, as E5's).
func (c grpcCall) bidiLockstep(ctx context.Context, i int64) (st callStats, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, c.w.op.GRPCPath)
	if err != nil {
		return st, err
	}
	for j := range c.w.messages {
		msg := c.w.message(i, j)
		if err := stream.SendMsg(msg); err != nil {
			if errors.Is(err, io.EOF) { // the server ended the call: RecvMsg returns its status
				break
			}
			return st, fmt.Errorf("sending message %d: %w", j+1, err)
		}
		st.sent++
		reply := c.w.newReply()
		if err := stream.RecvMsg(reply); err != nil {
			return st, fmt.Errorf("after %d replies: %w", st.received, err)
		}
		st.received++
		if err := c.w.check(msg, reply); err != nil {
			return st, fmt.Errorf("reply %d: %w", st.received, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		return st, fmt.Errorf("closing the send side: %w", err)
	}
	if err := stream.RecvMsg(c.w.newReply()); !errors.Is(err, io.EOF) {
		if err == nil {
			return st, fmt.Errorf("more replies than the %d messages sent", c.w.messages)
		}
		return st, fmt.Errorf("after %d replies: %w", st.received, err)
	}
	if st.received != c.w.messages {
		return st, fmt.Errorf("%d replies to %d messages", st.received, c.w.messages)
	}
	return st, nil
}

func (c *grpcCaller) close() error {
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

// grpcWebCaller sends unary and server-streaming calls as gRPC-Web (binary
// or text); gRPC-Web has no client streaming.
type grpcWebCaller struct {
	httpCaller
	url, contentType string
	fixedBody        []byte // when the request does not vary between calls
	text             bool
	w                *workload
}

func (c *grpcWebCaller) encode(req proto.Message) ([]byte, error) {
	msg, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encoding request: %w", err)
	}
	body := grpcweb.EncodeMessage(msg)
	if c.text {
		body = grpcweb.EncodeText(body)
	}
	return body, nil
}

func (c *grpcWebCaller) call(ctx context.Context, ci callInfo) (callStats, error) {
	req := c.w.request(ci.i)
	body := c.fixedBody
	if body == nil {
		var err error
		if body, err = c.encode(req); err != nil {
			return callStats{}, err
		}
	}
	st := callStats{sent: 1}
	extra := withRunID(withTraceparent(http.Header{
		"X-Grpc-Web": {"1"},
		"Accept":     {c.contentType},
	}, ci.traceparent), ci.runID)
	extra = withStack(extra, ci.stack)
	resp, body, err := c.do(ctx, http.MethodPost, c.url, c.contentType, body, extra)
	if err != nil {
		return st, fmt.Errorf("grpc-web %s: %w", c.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		if gs := resp.Header.Get("Grpc-Status"); gs != "" {
			return st, fmt.Errorf("grpc-web %s: HTTP %d, grpc-status %s: %s", c.url, resp.StatusCode, gs, resp.Header.Get("Grpc-Message"))
		}
		return st, fmt.Errorf("grpc-web %s: HTTP %d: %s", c.url, resp.StatusCode, snippet(body))
	}
	if c.text {
		if body, err = grpcweb.DecodeText(body); err != nil {
			return st, fmt.Errorf("grpc-web %s: %w", c.url, err)
		}
	}
	r, err := grpcweb.DecodeResponse(body)
	if err != nil {
		return st, fmt.Errorf("grpc-web %s: %w", c.url, err)
	}
	st.received = len(r.Messages)
	code, msg, err := grpcweb.Status(r, resp.Header)
	if err != nil {
		return st, fmt.Errorf("grpc-web %s: %w", c.url, err)
	}
	if code != codes.OK {
		return st, fmt.Errorf("grpc-web %s: grpc-status %d (%s): %s", c.url, code, code, msg)
	}
	want := 1
	if c.w.op.Streaming == "server" {
		want = c.w.replies
	}
	if len(r.Messages) != want {
		return st, fmt.Errorf("grpc-web %s: %d response messages, want %d", c.url, len(r.Messages), want)
	}
	for k, m := range r.Messages {
		reply := c.w.newReply()
		if err := proto.Unmarshal(m, reply); err != nil {
			return st, fmt.Errorf("grpc-web %s: decoding reply %d: %w", c.url, k+1, err)
		}
		if err := c.w.check(req, reply); err != nil {
			return st, fmt.Errorf("grpc-web %s: reply %d: %w", c.url, k+1, err)
		}
	}
	return st, nil
}

func snippet(b []byte) string {
	const max = 200
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}

// withStack adds the stack header when a stack was chosen.
func withStack(h http.Header, stack string) http.Header {
	if stack != "" {
		h.Set(StackHeader, stack)
	}
	return h
}

// withTraceparent sets the call's traceparent, if it has one (-trace off: none).
func withTraceparent(h http.Header, traceparent string) http.Header {
	if traceparent != "" {
		h.Set("Traceparent", traceparent)
	}
	return h
}

// withRunID adds the run header when the run has an id.
func withRunID(h http.Header, runID string) http.Header {
	if runID != "" {
		h.Set(RunHeader, runID)
	}
	return h
}
