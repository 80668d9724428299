package loadgen

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelens/wirelens/internal/domain"
	"github.com/wirelens/wirelens/internal/grpcserver"
	"github.com/wirelens/wirelens/internal/grpcweb"
	"github.com/wirelens/wirelens/internal/restserver"
)

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-[0-9a-f]{16}-01$`)

// fakeEnvoy stands in for Envoy's codec-AUTO listener: it routes gRPC to a
// grpc-go server, gRPC-Web through a small in-process bridge to the same
// server, and the rest to the REST handler, and records what it sees of
// every call.
type fakeEnvoy struct {
	rest, grpc http.Handler
	webStatus  string // if set, the grpc-status the gRPC-Web bridge answers

	mu    sync.Mutex
	calls map[string]seen // trace id -> the call's request
}

type seen struct {
	contentType, accept, runID, uri string
}

func (f *fakeEnvoy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	if m := traceparentRE.FindStringSubmatch(r.Header.Get("Traceparent")); m != nil {
		f.mu.Lock()
		f.calls[m[1]] = seen{ct, r.Header.Get("Accept"), r.Header.Get(RunHeader), r.URL.RequestURI()}
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

func (f *fakeEnvoy) seen(traceID string) (seen, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.calls[traceID]
	return s, ok
}

// grpcWeb bridges one gRPC-Web call to the gRPC server, as Envoy's grpc_web
// filter does: same message frames, the trailers folded into a last frame.
func (f *fakeEnvoy) grpcWeb(w http.ResponseWriter, r *http.Request, text bool) {
	body, _ := io.ReadAll(r.Body)
	if text {
		body, _ = grpcweb.DecodeText(body)
	}
	if r.Header.Get("X-Grpc-Web") != "1" {
		http.Error(w, "bad grpc-web request", http.StatusBadRequest)
		return
	}
	up := r.Clone(r.Context())
	up.ProtoMajor, up.ProtoMinor, up.Proto = 2, 0, "HTTP/2.0"
	up.Header.Set("Content-Type", "application/grpc")
	up.Header.Set("Te", "trailers")
	up.Body = io.NopCloser(bytes.NewReader(body))
	up.ContentLength = int64(len(body))
	rec := httptest.NewRecorder()
	f.grpc.ServeHTTP(rec, up)
	res := rec.Result()
	trailers := http.Header{}
	for _, k := range []string{"Grpc-Status", "Grpc-Message"} {
		if v := res.Trailer.Get(k) + res.Header.Get(k); v != "" {
			trailers.Set(k, v)
		}
	}
	if f.webStatus != "" {
		trailers = http.Header{"Grpc-Status": {f.webStatus}, "Grpc-Message": {"boom%21"}}
	}
	out := append(rec.Body.Bytes(), grpcweb.EncodeTrailers(trailers)...)
	if text {
		out = append(grpcweb.EncodeText(out[:len(out)/2]), grpcweb.EncodeText(out[len(out)/2:])...)
	}
	w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
	_, _ = w.Write(out)
}

// services is shared by the tests: generating the catalog takes a moment.
var services = domain.New()

func startFakeEnvoy(t *testing.T, webStatus string) (*fakeEnvoy, string) {
	t.Helper()
	rest, err := restserver.NewHandler(services)
	if err != nil {
		t.Fatal(err)
	}
	grpcSrv, _ := grpcserver.New(services)
	f := &fakeEnvoy{rest: rest, grpc: grpcSrv, webStatus: webStatus, calls: map[string]seen{}}
	ts := httptest.NewUnstartedServer(f)
	ts.Config = restserver.NewServer("", f) // HTTP/1.1 + h2c, like codec AUTO
	ts.Start()
	t.Cleanup(func() { ts.Close(); grpcSrv.Stop() })
	return f, strings.TrimPrefix(ts.URL, "http://")
}

// TestRunAllProtocols drives every operation over every protocol that can
// carry it, and checks the summary, the trace ids and the run id.
func TestRunAllProtocols(t *testing.T) {
	f, target := startFakeEnvoy(t, "")
	for _, proto := range Protocols() {
		for _, op := range Operations() {
			t.Run(proto+"/"+op, func(t *testing.T) {
				cfg := Config{
					Target: target, Protocol: proto, Operation: op, Name: "wirelens", Number: 100,
					Messages: 3, Count: 4, N: 7, Concurrency: 3, Timeout: 20 * time.Second, RunID: "run-" + proto,
				}
				if err := compatible(proto, op); err != nil {
					var ids bytes.Buffer
					cfg.TraceIDs = &ids
					if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "use -protocol grpc") {
						t.Fatalf("incompatible pair ran: %v", err)
					}
					return
				}
				var ids bytes.Buffer
				cfg.TraceIDs = &ids
				sum, err := Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				if sum.Calls != 7 || sum.OK != 7 || sum.Errors != 0 || sum.Protocol != proto || sum.Operation != op {
					t.Fatalf("summary = %+v", sum)
				}
				if sum.P50Ms <= 0 || sum.P99Ms < sum.P50Ms {
					t.Fatalf("latencies = %+v", sum)
				}
				wantSent, wantReceived := int64(7), int64(7)
				switch op {
				case "people.RegisterBatch":
					wantSent = 7 * 3
				case "echo.BiStream":
					wantSent, wantReceived = 7*3, 7*3
				case "echo.ServerStream":
					wantReceived = 7 * 4
				}
				if sum.MessagesSent != wantSent || sum.MessagesReceived != wantReceived {
					t.Fatalf("messages sent %d received %d, want %d %d", sum.MessagesSent, sum.MessagesReceived, wantSent, wantReceived)
				}
				lines := strings.Split(strings.TrimSuffix(ids.String(), "\n"), "\n")
				if len(lines) != 7 {
					t.Fatalf("trace id lines = %q", lines)
				}
				for _, l := range lines {
					fields := strings.Split(l, "\t")
					ok := len(fields) == 3 && fields[2] == "01"
					p, id := fields[0], fields[len(fields)-1]
					if len(fields) > 1 {
						id = fields[1]
					}
					s, seen := f.seen(id)
					if !ok || p != proto || len(id) != 32 || !seen || s.runID != cfg.RunID {
						t.Fatalf("trace line %q: protocol %q id %q seen by server %v (%+v)", l, p, id, seen, s)
					}
					if proto == ProtocolRESTProto && (s.contentType != "application/protobuf" || s.accept != "application/protobuf") {
						t.Fatalf("rest-proto call sent content-type %q accept %q", s.contentType, s.accept)
					}
				}
			})
		}
	}
}

// TestPerCallRequests checks the requests that vary between calls: GetProduct
// with -id 0 cycles ids, echo contents are TestContent<i>.
func TestPerCallRequests(t *testing.T) {
	f, target := startFakeEnvoy(t, "")
	uris := func(ids *bytes.Buffer) []string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(ids.String()), "\n") {
			id := strings.Split(l, "\t")[1]
			s, _ := f.seen(id)
			out = append(out, s.uri)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		op      string
		id      int
		content string
		want    []string
	}{
		{"catalog.GetProduct", 0, "", []string{"/v1/products/1", "/v1/products/2", "/v1/products/3"}},
		{"catalog.GetProduct", 42, "", []string{"/v1/products/42", "/v1/products/42", "/v1/products/42"}},
		{"echo.Unary", 0, "", []string{"/v1/echo?content=TestContent0", "/v1/echo?content=TestContent1", "/v1/echo?content=TestContent2"}},
		{"echo.Unary", 0, "a b", []string{"/v1/echo?content=a+b", "/v1/echo?content=a+b", "/v1/echo?content=a+b"}},
	} {
		var ids bytes.Buffer
		_, err := Run(context.Background(), Config{Target: target, Protocol: ProtocolREST, Operation: tc.op,
			ID: tc.id, Content: tc.content, N: 3, Concurrency: 2, Timeout: 10 * time.Second, TraceIDs: &ids})
		if err != nil {
			t.Fatal(err)
		}
		if got := uris(&ids); !slices.Equal(got, tc.want) {
			t.Errorf("%s -id %d -content %q: URIs %q, want %q", tc.op, tc.id, tc.content, got, tc.want)
		}
	}
}

// TestLongStreams runs E3's and E5's stream lengths: 10,000 persons on one
// client stream, 10,000 echoes on one bidi stream.
func TestLongStreams(t *testing.T) {
	_, target := startFakeEnvoy(t, "")
	for _, op := range []string{"people.RegisterBatch", "echo.BiStream"} {
		sum, err := Run(context.Background(), Config{Target: target, Protocol: ProtocolGRPC, Operation: op,
			Messages: 10_000, N: 1, Concurrency: 1, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if sum.OK != 1 || sum.MessagesSent != 10_000 {
			t.Fatalf("%s: summary %+v", op, sum)
		}
	}
}

// TestCheckFailures makes sure the checks bite: a server that answers the
// wrong thing fails the call.
func TestCheckFailures(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/echo":
			_, _ = io.WriteString(w, `{"content":"not the content"}`)
		case "/v1/products":
			_, _ = io.WriteString(w, `{"products":[{"id":2}]}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{}`)
		}
	}))
	defer ts.Close()
	for _, tc := range []struct{ protocol, op, want string }{
		{ProtocolREST, "echo.Unary", `echoed "not the content", want "TestContent0"`},
		{ProtocolREST, "catalog.ListProducts", "1 products, want 100"},
		{ProtocolREST, "math.CalculateFactorial", "result 0, want"},
		{ProtocolRESTProto, "hello.SayHello", "not protobuf"},
	} {
		_, err := Run(context.Background(), Config{Target: ts.URL, Protocol: tc.protocol, Operation: tc.op,
			Number: 10, N: 1, Concurrency: 1, Timeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: err = %v, want %q", tc.protocol, tc.op, err, tc.want)
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
	cfg := Config{Target: "", Protocol: "soap", N: 0, Concurrency: 0, Timeout: 0, Count: -1, Messages: -1, ID: -1, Number: -1,
		RunID: strings.Repeat("r", MaxRunIDLength-len(WarmupSuffix)+1)}
	err := cfg.Validate()
	for _, want := range []string{"-target", "-protocol", "-operation", "-n", "-concurrency", "-timeout", "-count", "-messages", "-id", "-number",
		"-run-id must be at most 121 characters"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want mention of %s", err, want)
		}
	}
	if _, err := Run(context.Background(), Config{Target: "127.0.0.1:1", Protocol: "rest", Operation: "hello.Nope",
		N: 1, Concurrency: 1, Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), "-operation must be one of") {
		t.Errorf("unknown operation: %v", err)
	}
	for _, tc := range []struct{ protocol, op, want string }{
		{ProtocolGRPCWeb, "people.RegisterBatch", "people.RegisterBatch is client-streaming and gRPC-Web cannot stream from the client: use -protocol grpc"},
		{ProtocolGRPCWebText, "echo.BiStream", "echo.BiStream is bidi-streaming and gRPC-Web cannot stream from the client"},
		{ProtocolREST, "echo.ServerStream", "has no google.api.http route, so no REST form: use -protocol grpc, grpc-web or grpc-web-text"},
		{ProtocolRESTProto, "people.RegisterBatch", "has no google.api.http route, so no REST form: use -protocol grpc"},
	} {
		cfg := Config{Target: "127.0.0.1:1", Protocol: tc.protocol, Operation: tc.op, N: 1, Concurrency: 1, Timeout: time.Second}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.protocol, tc.op, err, tc.want)
		}
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Operation: "catalog.GetProduct", ID: 10_001}, "-id must be in 0..10000"},
		{Config{Operation: "catalog.ListProducts", Count: 10_001}, "-count must be in 1..10000"},
		{Config{Operation: "math.CalculateFactorial", Number: 1 << 30}, "-number: "},
	} {
		tc.cfg.Target, tc.cfg.Protocol, tc.cfg.N, tc.cfg.Concurrency, tc.cfg.Timeout = "127.0.0.1:1", ProtocolGRPC, 1, 1, time.Second
		if _, err := Run(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
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
