package trace

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/wirelens/wirelens/internal/cli/clitest"
)

func loadFixture(t *testing.T) (*Trace, []byte) {
	t.Helper()
	data, err := os.ReadFile("testdata/trace.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc Document
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return &doc.Data[0], data
}

const wantTree = `trace 4bf92f3577b34da6a3ce929d0e0e4736: 5 spans, 2 services, 2.500 s, started 2026-11-22 03:00:03.001000 UTC
├─ wirelens-envoy: ingress  5.000 ms  at +0 µs  span 00000000000000a1  (parent 00000000000000ff not in this trace)
│  │  http.method         POST
│  │  wirelens.operation  hello.SayHello
│  ├─ wirelens-envoy: filter  50 µs  at +100 µs  span 00000000000000d4
│  └─ wirelens-envoy: router grpc_service egress  3.000 ms  at +200 µs  span 00000000000000b2
│     │  http.status_code                200
│     │  rpc.grpc.status_code            0
│     │  wirelens.malformed              false
│     │  wirelens.protocol               grpc
│     │  wirelens.request.message.bytes  1234567890123
│     │  wirelens.request.messages       1
│     │  wirelens.sample_rate            0.25
│     └─ grpc-service: /wirelens.v1.Hello/SayHello  2.500 ms  at +500 µs  span 00000000000000c3
│           rpc.system  grpc
└─ grpc-service: late  1.500 s  at +1.000 s  span 00000000000000e5  (parent 0000000000000999 not in this trace)
      http.response.body.size  57
`

func TestPrintTree(t *testing.T) {
	tr, _ := loadFixture(t)
	var b strings.Builder
	if err := Print(&b, tr, PrintOptions{}); err != nil {
		t.Fatal(err)
	}
	if b.String() != wantTree {
		t.Errorf("got\n%s\nwant\n%s", b.String(), wantTree)
	}
	b.Reset()
	if err := Print(&b, tr, PrintOptions{AllTags: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "component") || !strings.Contains(b.String(), "node_id             wirelens-local") {
		t.Errorf("--all-tags output:\n%s", b.String())
	}
}

func TestTreeStructure(t *testing.T) {
	tr, _ := loadFixture(t)
	roots := Tree(tr)
	if len(roots) != 2 || roots[0].Span.SpanID != "00000000000000a1" || roots[1].Span.SpanID != "00000000000000e5" {
		t.Fatalf("roots %v", roots)
	}
	kids := roots[0].Children
	if len(kids) != 2 || kids[0].Span.SpanID != "00000000000000d4" || kids[1].Children[0].Service != "grpc-service" {
		t.Errorf("children of the root: %+v", kids)
	}
}

func TestFormatValue(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{{float64(3), "3"}, {float64(-2), "-2"}, {1.5, "1.5"}, {"x", "x"}, {true, "true"}, {nil, "null"}, {float64(1e15), "1000000000000000"}} {
		if got := FormatValue(c.in); got != c.want {
			t.Errorf("FormatValue(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestFetch(t *testing.T) {
	_, fixture := loadFixture(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/traces/4bf92f3577b34da6a3ce929d0e0e4736":
			w.Write(fixture)
		case "/api/traces/0000000000000000000000000000000b":
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"data":null,"errors":[{"code":500,"msg":"storage is down"}]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"data":null,"total":0,"limit":0,"offset":0,"errors":[{"code":404,"msg":"trace not found"}]}`)
		}
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL + "/"}
	tr, err := c.Fetch(context.Background(), "4bf92f3577b34da6a3ce929d0e0e4736")
	if err != nil || len(tr.Spans) != 5 {
		t.Fatalf("Fetch: %v, %v", tr, err)
	}
	_, err = c.Fetch(context.Background(), "0123456789abcdef0123456789abcdef")
	var nf *NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), "not found in Jaeger at "+srv.URL) {
		t.Errorf("missing trace: %v", err)
	}
	_, err = c.Fetch(context.Background(), "0000000000000000000000000000000b")
	if err == nil || !strings.Contains(err.Error(), "HTTP 500") || !strings.Contains(err.Error(), "storage is down") {
		t.Errorf("server error: %v", err)
	}
	if _, err := c.Fetch(context.Background(), "not-hex"); err == nil || !strings.Contains(err.Error(), "not a trace id") {
		t.Errorf("bad id: %v", err)
	}
}

func TestFetchUnreachable(t *testing.T) {
	url := clitest.ClosedURL(t)
	_, err := (&Client{URL: url}).Fetch(context.Background(), "abc")
	want := "Jaeger is not reachable at " + url + ": connection refused"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}
