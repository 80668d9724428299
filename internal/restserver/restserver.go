// Package restserver is the REST transport of the wirelens services: net/http,
// one route per google.api.http rule of the proto methods, the request
// message bound from the path template, the query string and the body, the
// same domain code as the gRPC transport behind it.
//
// Bodies are proto3 JSON by default (restapi.MarshalJSON: lowerCamel
// json_name keys, int64 as strings, default values omitted, no insignificant
// whitespace and no trailing newline), which is what Envoy's
// grpc_json_transcoder answers for the same call. A request whose Accept
// names application/protobuf (or application/x-protobuf) gets the protobuf
// encoding with that Content-Type; a request body whose Content-Type is one
// of them is decoded as protobuf. Errors are always JSON, shaped like
// google.rpc.Status: {"code":3,"message":"..."}.
//
// Compression: a request body with Content-Encoding: gzip is decompressed
// before it is decoded (any other encoding but identity answers 400); an
// answer is gzipped, with Content-Encoding: gzip, only when the request's
// Accept-Encoding accepts gzip, so that without it the bytes stay exact.
//
// Known latency (package delay): x-wirelens-hold-ms holds every answer
// before it starts; x-wirelens-pause-ms sends an answer in two parts, chunked
// (no Content-Length): the headers and the first half of the body are
// flushed, then the server pauses, then it writes the rest.
package restserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/wirelens/wirelens/internal/apierr"
	"github.com/wirelens/wirelens/internal/delay"
	"github.com/wirelens/wirelens/internal/domain"
	"github.com/wirelens/wirelens/internal/ops"
	"github.com/wirelens/wirelens/internal/restapi"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

// ErrorBody is the JSON error answer, shaped like google.rpc.Status.
type ErrorBody struct {
	Code    codes.Code `json:"code"`
	Message string     `json:"message"`
}

// endpoint builds the handler of one method for one of its HTTP rules, and
// the ServeMux path pattern of the rule.
type endpoint func(rule ops.HTTPRule) (muxPath string, h http.HandlerFunc, err error)

type server struct {
	svc *domain.Services
}

// NewHandler returns the REST handler: one route per google.api.http rule of
// every wirelens method, plus GET /healthz, each answer held as long as the
// request's x-wirelens-hold-ms asks (package delay). It fails if an annotated
// method has no REST implementation or a rule is not supported.
func NewHandler(svc *domain.Services) (http.Handler, error) {
	s := &server{svc: svc}
	impl := map[protoreflect.FullName]endpoint{
		"wirelens.v1.Hello.SayHello":          unary(s.sayHello),
		"wirelens.v1.Hello.SayHelloBig":       unary(s.sayHelloBig),
		"wirelens.v1.Math.CalculateFactorial": unary(s.calculateFactorial),
		"wirelens.v1.People.Register":         unary(s.register),
		"wirelens.v1.Catalog.GetProduct":      unary(s.getProduct),
		"wirelens.v1.Catalog.ListProducts":    unary(s.listProducts),
		"wirelens.v1.Echo.Unary":              unary(s.echo),
	}
	mux := http.NewServeMux()
	for _, op := range ops.All() {
		if len(op.HTTPRules) == 0 {
			continue
		}
		ep, ok := impl[op.Method.FullName()]
		if !ok {
			return nil, fmt.Errorf("no REST handler for %s (%s)", op.Method.FullName(), op.Name)
		}
		for _, rule := range op.HTTPRules {
			path, h, err := ep(rule)
			if err != nil {
				return nil, fmt.Errorf("%s: %s %s: %w", op.Name, rule.Method, rule.Pattern, err)
			}
			mux.HandleFunc(rule.Method+" "+path, h)
		}
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
	})
	return holding(mux), nil
}

type pauseKey struct{}

// holding delays every answer of next by the request's hold, so that the
// response starts no earlier, and hands the request's pause to write (the
// answer's first part, then the pause, then the rest).
func holding(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delays, err := delay.FromHeaders(r.Header.Values)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if err := delay.Wait(r.Context(), delays.Hold); err != nil {
			writeError(w, r, fmt.Errorf("holding the response %v: %w", delays.Hold, err))
			return
		}
		if delays.Pause > 0 {
			r = r.WithContext(context.WithValue(r.Context(), pauseKey{}, delays.Pause))
		}
		next.ServeHTTP(w, r)
	})
}

// pauseOf is the pause the request asked for (0: none).
func pauseOf(r *http.Request) time.Duration {
	d, _ := r.Context().Value(pauseKey{}).(time.Duration)
	return d
}

// NewServer returns an http.Server for h that speaks HTTP/1.1 and
// unencrypted HTTP/2 with prior knowledge (h2c), as Envoy's upstreams do.
func NewServer(addr string, h http.Handler) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

func (s *server) sayHello(ctx context.Context, req *wirelensv1.HelloRequest) (*wirelensv1.HelloReply, error) {
	msg, err := s.svc.Hello.SayHello(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &wirelensv1.HelloReply{Message: msg}, nil
}

func (s *server) sayHelloBig(ctx context.Context, req *wirelensv1.HelloRequest) (*wirelensv1.HelloBigReply, error) {
	rep, err := s.svc.Hello.SayHelloBig(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &wirelensv1.HelloBigReply{Message: rep.Message, DataList: rep.DataList}, nil
}

func (s *server) calculateFactorial(ctx context.Context, req *wirelensv1.FactorialRequest) (*wirelensv1.FactorialReply, error) {
	r, err := s.svc.Math.CalculateFactorial(ctx, req.GetNumber())
	if err != nil {
		return nil, err
	}
	return &wirelensv1.FactorialReply{Result: r.Value, TimeTaken: float32(r.TimeTaken.Seconds())}, nil
}

func (s *server) register(ctx context.Context, req *wirelensv1.Person) (*emptypb.Empty, error) {
	if err := s.svc.People.Register(ctx, req); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

func (s *server) getProduct(ctx context.Context, req *wirelensv1.GetProductRequest) (*wirelensv1.Product, error) {
	return s.svc.Catalog.Get(ctx, req.GetId())
}

func (s *server) listProducts(ctx context.Context, req *wirelensv1.ListProductsRequest) (*wirelensv1.ListProductsReply, error) {
	l, err := s.svc.Catalog.List(ctx, req.GetCount())
	if err != nil {
		return nil, err
	}
	return &wirelensv1.ListProductsReply{Products: l}, nil
}

func (s *server) echo(ctx context.Context, req *wirelensv1.EchoRequest) (*wirelensv1.EchoReply, error) {
	content, err := s.svc.Echo.Echo(ctx, req.GetContent())
	if err != nil {
		return nil, err
	}
	return &wirelensv1.EchoReply{Content: content}, nil
}

// unary adapts a typed method to an endpoint: the request is bound from the
// rule's path variables, then from the body (body "*") or the query string
// (no body), and the reply is encoded as the client's Accept asks.
func unary[Req, Rep proto.Message](call func(context.Context, Req) (Rep, error)) endpoint {
	return func(rule ops.HTTPRule) (string, http.HandlerFunc, error) {
		t, err := restapi.ParseTemplate(rule.Pattern)
		if err != nil {
			return "", nil, err
		}
		if rule.Body != "" && rule.Body != "*" {
			return "", nil, fmt.Errorf("body %q is not supported (only \"*\" or none)", rule.Body)
		}
		var zero Req // a typed nil: its ProtoReflect().Type() is the message type
		msgType := zero.ProtoReflect().Type()
		return t.Mux, func(w http.ResponseWriter, r *http.Request) {
			req := msgType.New().Interface().(Req)
			if err := bind(w, r, t, rule.Body == "*", req); err != nil {
				writeError(w, r, err)
				return
			}
			rep, err := call(r.Context(), req)
			if err != nil {
				writeError(w, r, err)
				return
			}
			writeMessage(w, r, rep)
		}, nil
	}
}

// bind fills req from the body (when withBody), the path and the query
// string (when not withBody). An empty body is the empty message, as with
// gRPC-JSON transcoding.
func bind(w http.ResponseWriter, r *http.Request, t restapi.Template, withBody bool, req proto.Message) error {
	if withBody {
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		if len(body) > 0 {
			if restapi.IsProtobuf(r.Header.Get("Content-Type")) {
				if err := proto.Unmarshal(body, req); err != nil {
					return apierr.InvalidArgument("invalid protobuf body: %v", err)
				}
			} else if err := restapi.UnmarshalJSON(body, req, false); err != nil {
				return apierr.InvalidArgument("invalid JSON body: %v", err)
			}
		}
	}
	query := r.URL.Query()
	if withBody {
		query = nil
	}
	if err := restapi.Bind(req, t, r.PathValue, query); err != nil {
		return apierr.InvalidArgument("%v", err)
	}
	return nil
}

// readBody reads the request body, at most MaxBodyBytes on the wire and,
// when it is gzipped (Content-Encoding: gzip), at most MaxBodyBytes once
// decompressed.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	wire := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	var body io.Reader = wire
	encoding := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	switch encoding {
	case "", "identity":
	case "gzip", "x-gzip":
		gz, err := gzip.NewReader(wire)
		if err != nil {
			return nil, bodyError(err)
		}
		defer gz.Close()
		body = &limited{r: gz, n: MaxBodyBytes}
	default:
		return nil, apierr.InvalidArgument("unsupported Content-Encoding %q (gzip or identity)", encoding)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, bodyError(err)
	}
	return data, nil
}

func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Errorf("reading request body: %w", tooBig) // 413, see writeError
	}
	return apierr.InvalidArgument("reading request body: %v", err)
}

// limited reads at most n bytes of r and fails with an *http.MaxBytesError
// past them: a small gzipped body cannot unpack into a large one.
type limited struct {
	r io.Reader
	n int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n < 0 {
		return 0, &http.MaxBytesError{Limit: MaxBodyBytes}
	}
	if int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.n < 0 {
		return n, &http.MaxBytesError{Limit: MaxBodyBytes}
	}
	return n, err
}

// acceptsGzip reports whether an Accept-Encoding header accepts gzip: a
// gzip, x-gzip or * entry whose q is not 0 (RFC 9110, 12.5.3).
func acceptsGzip(r *http.Request) bool {
	for _, value := range r.Header.Values("Accept-Encoding") {
		for _, entry := range strings.Split(value, ",") {
			name, params, _ := strings.Cut(entry, ";")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "gzip", "x-gzip", "*":
			default:
				continue
			}
			q := 1.0
			for _, param := range strings.Split(params, ";") {
				k, v, _ := strings.Cut(param, "=")
				if strings.EqualFold(strings.TrimSpace(k), "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
						q = f
					}
				}
			}
			if q > 0 {
				return true
			}
		}
	}
	return false
}

// writeMessage answers m as protobuf when the Accept header asks for it,
// as compact proto3 JSON otherwise.
func writeMessage(w http.ResponseWriter, r *http.Request, m proto.Message) {
	var (
		body []byte
		err  error
	)
	ct, isProto := restapi.AcceptsProtobuf(r.Header.Get("Accept"))
	if isProto {
		body, err = restapi.MarshalProto(m)
	} else {
		ct = restapi.ContentTypeJSON
		body, err = restapi.MarshalJSON(m)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	write(w, r, http.StatusOK, ct, body)
}

func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeJSON(w, r, http.StatusRequestEntityTooLarge, ErrorBody{
			Code: codes.ResourceExhausted, Message: fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)})
		return
	}
	code := apierr.Code(err)
	msg := err.Error()
	var e *apierr.Error
	switch {
	case errors.As(err, &e):
		msg = e.Message
	case code == codes.Internal:
		slog.ErrorContext(r.Context(), "request failed", "path", r.URL.Path, "err", err)
		msg = "internal error"
	}
	writeJSON(w, r, apierr.HTTPStatus(code), ErrorBody{Code: code, Message: msg})
}

// writeJSON answers json.Marshal(v).
func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"code":13,"message":"encoding response"}`)
	}
	write(w, r, status, restapi.ContentTypeJSON, body)
}

// write answers body, gzipped when the request accepts gzip. Without a
// pause it has an explicit Content-Length, so body sizes are exactly those
// of the encoding; with one (x-wirelens-pause-ms) it is chunked: the headers
// and the first half of the body are flushed, the pause passes, then the
// rest follows.
func write(w http.ResponseWriter, r *http.Request, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	if acceptsGzip(r) { // only then a Vary too: without gzip the headers stay byte for byte as they were
		h.Add("Vary", "Accept-Encoding")
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		_, _ = gz.Write(body)
		if err := gz.Close(); err == nil {
			body = buf.Bytes()
			h.Set("Content-Encoding", "gzip")
		}
	}
	pause := pauseOf(r)
	if pause <= 0 {
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	h.Del("Content-Length")
	w.WriteHeader(status)
	first := (len(body) + 1) / 2
	_, _ = w.Write(body[:first])
	if err := http.NewResponseController(w).Flush(); err != nil {
		slog.WarnContext(r.Context(), "flushing the first part", "path", r.URL.Path, "err", err)
	}
	if err := delay.Wait(r.Context(), pause); err != nil {
		return // the client left: the rest has nowhere to go
	}
	_, _ = w.Write(body[first:])
}
