package restserver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/wirelens/wirelens/services/internal/hello"
)

func newHandler(t *testing.T) http.Handler {
	t.Helper()
	h, err := NewHandler(hello.New())
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
	for _, body := range []string{`{"name":`, `{"name":42}`, `{"name":"a"} x`, `[`} {
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
