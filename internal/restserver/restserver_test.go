package restserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/wirelens/wirelens/internal/catalog"
	"github.com/wirelens/wirelens/internal/domain"
	"github.com/wirelens/wirelens/internal/hello"
	"github.com/wirelens/wirelens/internal/mathsvc"
	"github.com/wirelens/wirelens/internal/ops"
	"github.com/wirelens/wirelens/internal/restapi"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// services is shared by the tests: generating the catalog takes a moment.
var services = domain.New()

func newHandler(t *testing.T) http.Handler {
	t.Helper()
	h, err := NewHandler(services)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func do(t *testing.T, h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func bigJSON(name string) string {
	var b strings.Builder
	b.WriteString(`{"message":"Hello, ` + name + `","dataList":[`)
	for i := 0; i < hello.BigItems; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"Item ` + strconv.Itoa(i) + `"`)
	}
	b.WriteString(`]}`)
	return b.String()
}

func TestSayHelloExactBytes(t *testing.T) {
	rec := do(t, newHandler(t), "POST", "/v1/hello", `{"name":"wirelens"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status = %d, body %s", rec.Code, rec.Body)
	}
	want := `{"message":"Hello, wirelens"}`
	if got := rec.Body.String(); got != want {
		t.Fatalf("body = %q, want %q", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content-type = %q", ct)
	}
	if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(want)) {
		t.Fatalf("content-length = %q, want %d", cl, len(want))
	}
}

func TestSayHelloBigExactBytes(t *testing.T) {
	rec := do(t, newHandler(t), "POST", "/v1/hello-big", `{"name":"wirelens"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status = %d, body %s", rec.Code, rec.Body)
	}
	want := bigJSON("wirelens")
	if got := rec.Body.String(); got != want {
		t.Fatalf("body (%d bytes) differs from want (%d bytes); starts %q", len(got), len(want), got[:min(80, len(got))])
	}
	if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(want)) {
		t.Fatalf("content-length = %q, want %d", cl, len(want))
	}
}

func TestEmptyBodyIsEmptyRequest(t *testing.T) {
	rec := do(t, newHandler(t), "POST", "/v1/hello", "")
	if rec.Code != http.StatusOK || rec.Body.String() != `{"message":"Hello, "}` {
		t.Fatalf("got %d %q", rec.Code, rec.Body)
	}
}

func TestBadJSON(t *testing.T) {
	for _, body := range []string{`{"name":`, `{"name":42}`, `{"name":"a"} x`, `[`, `{"nome":"a"}`} {
		rec := do(t, newHandler(t), "POST", "/v1/hello", body)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("body %q: status = %d, want 400", body, rec.Code)
		}
		if !strings.HasPrefix(rec.Body.String(), `{"code":3,"message":"invalid JSON body: `) {
			t.Errorf("body %q: answer = %s", body, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("body %q: content-type = %q", body, ct)
		}
	}
}

func TestBodyTooLarge(t *testing.T) {
	body := `{"name":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	rec := do(t, newHandler(t), "POST", "/v1/hello", body)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d, want 413", rec.Code)
	}
}

func TestHealthzAndRouting(t *testing.T) {
	h := newHandler(t)
	if rec := do(t, h, "GET", "/healthz", ""); rec.Code != 200 || rec.Body.String() != "ok" {
		t.Fatalf("healthz = %d %q", rec.Code, rec.Body)
	}
	if rec := do(t, h, "GET", "/v1/hello", ""); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/hello = %d, want 405", rec.Code)
	}
	if rec := do(t, h, "POST", "/v1/nope", "{}"); rec.Code != http.StatusNotFound {
		t.Fatalf("POST /v1/nope = %d, want 404", rec.Code)
	}
}

// TestServerSpeaksH2C checks the real server configuration: HTTP/1.1 and
// unencrypted HTTP/2 with prior knowledge on one port.
func TestServerSpeaksH2C(t *testing.T) {
	ts := httptest.NewUnstartedServer(newHandler(t))
	ts.Config = NewServer("", ts.Config.Handler)
	ts.Start()
	defer ts.Close()

	for _, tc := range []struct {
		name  string
		proto func(*http.Protocols)
		want  int
	}{
		{"http1", func(p *http.Protocols) { p.SetHTTP1(true) }, 1},
		{"h2c", func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p http.Protocols
			tc.proto(&p)
			tr := &http.Transport{Protocols: &p}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Post(ts.URL+"/v1/hello", "application/json", strings.NewReader(`{"name":"h"}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.ProtoMajor != tc.want || string(body) != `{"message":"Hello, h"}` {
				t.Fatalf("proto %d body %q", resp.ProtoMajor, body)
			}
		})
	}
}

func doWith(t *testing.T, h http.Handler, method, path string, body []byte, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestExactJSON pins the JSON bodies: proto3 JSON names, int64 as a string,
// default values left out, no whitespace.
func TestExactJSON(t *testing.T) {
	h := newHandler(t)
	for _, tc := range []struct {
		method, path, body, want string
	}{
		{"POST", "/v1/person", `{"name":"kevin","age":1,"hobbies":["foot ball","basket ball"],"address":{"city":"seoul","zipCode":"123456"}}`, `{}`},
		{"POST", "/v1/person", ``, `{}`},
		{"GET", "/v1/echo?content=TestContent0", ``, `{"content":"TestContent0"}`},
		{"GET", "/v1/echo?content=a%20b%26c", ``, `{"content":"a b&c"}`},
		{"GET", "/v1/echo", ``, `{}`},
		{"GET", "/v1/products?count=1", ``, `{"products":[` + productJSON(t, 1) + `]}`},
		{"GET", "/v1/products/7", ``, productJSON(t, 7)},
	} {
		rec := do(t, h, tc.method, tc.path, tc.body)
		if rec.Code != http.StatusOK || rec.Body.String() != tc.want {
			t.Errorf("%s %s: %d %s, want %s", tc.method, tc.path, rec.Code, rec.Body, tc.want)
		}
		if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(len(tc.want)) {
			t.Errorf("%s %s: content-length %q, want %d", tc.method, tc.path, cl, len(tc.want))
		}
	}
}

func productJSON(t *testing.T, id int32) string {
	t.Helper()
	p, err := services.Catalog.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := restapi.MarshalJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFactorialJSON(t *testing.T) {
	rec := do(t, newHandler(t), "POST", "/v1/factorial", `{"number":10000}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	want, _ := mathsvc.Factorial(context.Background(), 10000)
	var got struct {
		Result    string  `json:"result"` // int64: a JSON string
		TimeTaken float64 `json:"timeTaken"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("%s: %v", rec.Body, err)
	}
	if got.Result != strconv.FormatInt(want, 10) || got.TimeTaken <= 0 {
		t.Fatalf("body %s, want result %d", rec.Body, want)
	}
}

// TestProtobuf checks application/protobuf both ways: as the request body and
// as the answer the Accept header asks for.
func TestProtobuf(t *testing.T) {
	h := newHandler(t)
	reqBody, _ := proto.Marshal(&wirelensv1.HelloRequest{Name: "wirelens"})
	for _, ct := range []string{restapi.ContentTypeProtobuf, restapi.ContentTypeXProtobuf} {
		rec := doWith(t, h, "POST", "/v1/hello", reqBody, http.Header{"Content-Type": {ct}, "Accept": {ct}})
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != ct {
			t.Fatalf("%s: %d %q %q", ct, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
		var rep wirelensv1.HelloReply
		if err := proto.Unmarshal(rec.Body.Bytes(), &rep); err != nil || rep.GetMessage() != "Hello, wirelens" {
			t.Fatalf("%s: reply %v, %v", ct, &rep, err)
		}
	}
	// A protobuf request answered as JSON (no Accept), and the reverse.
	rec := doWith(t, h, "POST", "/v1/hello", reqBody, http.Header{"Content-Type": {"application/protobuf"}})
	if rec.Body.String() != `{"message":"Hello, wirelens"}` || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("protobuf in, JSON out: %q", rec.Body)
	}
	rec = doWith(t, h, "GET", "/v1/echo?content=x", nil, http.Header{"Accept": {"text/html, application/x-protobuf;q=0.9"}})
	want, _ := proto.Marshal(&wirelensv1.EchoReply{Content: "x"})
	if !bytes.Equal(rec.Body.Bytes(), want) || rec.Header().Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("JSON-less GET, protobuf out: %q %q", rec.Header().Get("Content-Type"), rec.Body)
	}
	// Register answers the empty message: zero bytes of protobuf.
	rec = doWith(t, h, "POST", "/v1/person", nil, http.Header{"Accept": {"application/protobuf"}})
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != "0" {
		t.Fatalf("Register as protobuf: %d %q", rec.Code, rec.Body)
	}
	// Bad protobuf.
	rec = doWith(t, h, "POST", "/v1/hello", []byte{0x0a, 0x05, 'x'}, http.Header{"Content-Type": {"application/protobuf"}})
	if rec.Code != http.StatusBadRequest || !strings.HasPrefix(rec.Body.String(), `{"code":3,"message":"invalid protobuf body: `) {
		t.Fatalf("bad protobuf: %d %s", rec.Code, rec.Body)
	}
}

func TestErrors(t *testing.T) {
	h := newHandler(t)
	for _, tc := range []struct {
		method, path, body string
		status             int
		prefix             string
	}{
		{"GET", "/v1/products/0", "", 404, `{"code":5,"message":"product 0 not found`},
		{"GET", "/v1/products/10001", "", 404, `{"code":5,"message":"product 10001 not found`},
		{"GET", "/v1/products/abc", "", 400, `{"code":3,"message":"path variable id: `},
		{"GET", "/v1/products?count=-1", "", 400, `{"code":3,"message":"count must be in 0..10000`},
		{"GET", "/v1/products?count=1&color=red", "", 400, `{"code":3,"message":"query parameter color: no such field`},
		{"GET", "/v1/products?count=1&count=2", "", 400, `{"code":3,"message":"query parameter count: `},
		{"POST", "/v1/factorial", `{"number":-5}`, 400, `{"code":3,"message":"number must be in 0..`},
		{"POST", "/v1/factorial", `{"number":"x"}`, 400, `{"code":3,"message":"invalid JSON body: `},
		{"POST", "/v1/products/1", "", 405, ``},
	} {
		rec := do(t, h, tc.method, tc.path, tc.body)
		if rec.Code != tc.status || !strings.HasPrefix(rec.Body.String(), tc.prefix) {
			t.Errorf("%s %s: %d %s, want %d %s...", tc.method, tc.path, rec.Code, rec.Body, tc.status, tc.prefix)
		}
	}
}

func TestListProductsDefaultAndSizes(t *testing.T) {
	h := newHandler(t)
	for _, tc := range []struct {
		query    string
		n        int
		min, max int
	}{{"", catalog.DefaultListCount, 55_000, 90_000}, {"?count=100", 100, 55_000, 90_000}, {"?count=500", 500, 100_001, 700_000}} {
		rec := do(t, h, "GET", "/v1/products"+tc.query, "")
		var rep wirelensv1.ListProductsReply
		if err := restapi.UnmarshalJSON(rec.Body.Bytes(), &rep, false); err != nil {
			t.Fatal(err)
		}
		if len(rep.GetProducts()) != tc.n || rec.Body.Len() < tc.min || rec.Body.Len() > tc.max {
			t.Errorf("GET /v1/products%s: %d products, %d bytes", tc.query, len(rep.GetProducts()), rec.Body.Len())
		}
	}
}

func TestUnsupportedRules(t *testing.T) {
	ep := unary(func(context.Context, *wirelensv1.EchoRequest) (*wirelensv1.EchoReply, error) { return nil, nil })
	for _, rule := range []ops.HTTPRule{
		{Method: "POST", Pattern: "/v1/echo", Body: "content"},
		{Method: "GET", Pattern: "/v1/echo:verb"},
	} {
		if _, _, err := ep(rule); err == nil {
			t.Errorf("rule %+v accepted", rule)
		}
	}
	path, h, err := ep(ops.HTTPRule{Method: "GET", Pattern: "/v1/echo/{content}"})
	if err != nil || h == nil || path != "/v1/echo/{p0}" {
		t.Fatalf("ep = %q, %v", path, err)
	}
}

func TestInternalErrorsAreHidden(t *testing.T) {
	ep := unary(func(context.Context, *wirelensv1.EchoRequest) (*wirelensv1.EchoReply, error) {
		return nil, errors.New("secret detail")
	})
	_, h, err := ep(ops.HTTPRule{Method: "GET", Pattern: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest("GET", "/x", nil))
	if rec.Code != 500 || rec.Body.String() != `{"code":13,"message":"internal error"}` {
		t.Fatalf("got %d %s", rec.Code, rec.Body)
	}
}
