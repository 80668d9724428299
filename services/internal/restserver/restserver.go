// Package restserver is the REST/JSON transport of the Hello service:
// net/http and encoding/json, routes taken from the google.api.http
// annotations of proto/wirelens/v1/hello.proto, JSON field names equal to the
// proto json_name (lowerCamel), bodies written without a trailing newline.
package restserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/wirelens/wirelens/services/internal/hello"
	"github.com/wirelens/wirelens/services/internal/ops"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

// Request is the JSON form of wirelens.v1.HelloRequest.
type Request struct {
	Name string `json:"name"`
}

// Reply is the JSON form of wirelens.v1.HelloReply.
type Reply struct {
	Message string `json:"message"`
}

// BigReply is the JSON form of wirelens.v1.HelloBigReply.
type BigReply struct {
	Message  string   `json:"message"`
	DataList []string `json:"dataList"`
}

// ErrorBody is the JSON error answer, shaped like google.rpc.Status.
type ErrorBody struct {
	Code    codes.Code `json:"code"`
	Message string     `json:"message"`
}

type server struct {
	svc *hello.Service
}

// NewHandler returns the REST handler: one route per google.api.http rule of
// the Hello service, plus GET /healthz. It fails if an annotated method has
// no REST implementation.
func NewHandler(svc *hello.Service) (http.Handler, error) {
	s := &server{svc: svc}
	impl := map[protoreflect.FullName]http.HandlerFunc{
		"wirelens.v1.Hello.SayHello":    s.sayHello,
		"wirelens.v1.Hello.SayHelloBig": s.sayHelloBig,
	}
	mux := http.NewServeMux()
	for _, op := range ops.All() {
		if len(op.HTTPRules) == 0 {
			continue
		}
		h, ok := impl[op.Method.FullName()]
		if !ok {
			return nil, fmt.Errorf("no REST handler for %s (%s)", op.Method.FullName(), op.Name)
		}
		for _, rule := range op.HTTPRules {
			mux.HandleFunc(rule.Method+" "+rule.Pattern, h)
		}
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
	})
	return mux, nil
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

func (s *server) sayHello(w http.ResponseWriter, r *http.Request) {
	req, ok := decode(w, r)
	if !ok {
		return
	}
	msg, err := s.svc.SayHello(r.Context(), req.Name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, Reply{Message: msg})
}

func (s *server) sayHelloBig(w http.ResponseWriter, r *http.Request) {
	req, ok := decode(w, r)
	if !ok {
		return
	}
	rep, err := s.svc.SayHelloBig(r.Context(), req.Name)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, BigReply{Message: rep.Message, DataList: rep.DataList})
}

// decode reads a JSON HelloRequest; an empty body is the empty request (as
// with gRPC-JSON transcoding). On failure it has already answered.
func decode(w http.ResponseWriter, r *http.Request) (Request, bool) {
	var req Request
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, ErrorBody{
				Code: codes.ResourceExhausted, Message: fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)})
			return req, false
		}
		writeJSON(w, http.StatusBadRequest, ErrorBody{Code: codes.InvalidArgument, Message: "reading request body: " + err.Error()})
		return req, false
	}
	if len(body) == 0 {
		return req, true
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, ErrorBody{Code: codes.InvalidArgument, Message: "invalid JSON body: " + err.Error()})
		return req, false
	}
	return req, true
}

func writeError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		writeJSON(w, http.StatusGatewayTimeout, ErrorBody{Code: codes.DeadlineExceeded, Message: err.Error()})
	case errors.Is(err, context.Canceled):
		// The client has gone; 499 as nginx and Envoy's access logs use it.
		writeJSON(w, 499, ErrorBody{Code: codes.Canceled, Message: err.Error()})
	default:
		slog.ErrorContext(r.Context(), "request failed", "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, ErrorBody{Code: codes.Internal, Message: "internal error"})
	}
}

// writeJSON answers json.Marshal(v), with an explicit Content-Length and no
// trailing newline, so body sizes are exactly those of the encoding.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"code":13,"message":"encoding response"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
