package restserver

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/wirelens/wirelens/internal/delay"
)

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gunzipped(t *testing.T, data []byte) string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not gzip: %v (%q)", err, data)
	}
	out, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestGzipRequestBodyIsDecompressed(t *testing.T) {
	h := newHandler(t)
	rec := doWith(t, h, "POST", "/v1/hello", gzipped(t, []byte(`{"name":"zip"}`)), http.Header{
		"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}})
	if rec.Code != http.StatusOK || rec.Body.String() != `{"message":"Hello, zip"}` {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if ce := rec.Header().Get("Content-Encoding"); ce != "" {
		t.Fatalf("answer encoded %q without Accept-Encoding", ce)
	}
}

func TestGzipAnswerOnlyWhenAccepted(t *testing.T) {
	h := newHandler(t)
	for _, tc := range []struct {
		accept string
		gzip   bool
	}{
		{"", false},
		{"identity", false},
		{"gzip;q=0", false},
		{"br, deflate", false},
		{"gzip", true},
		{"deflate, GZIP;q=0.5", true},
		{"*", true},
	} {
		header := http.Header{"Content-Type": {"application/json"}}
		if tc.accept != "" {
			header.Set("Accept-Encoding", tc.accept)
		}
		rec := doWith(t, h, "POST", "/v1/hello", []byte(`{"name":"z"}`), header)
		const want = `{"message":"Hello, z"}`
		got := rec.Body.Bytes()
		if rec.Header().Get("Content-Length") != strconv.Itoa(len(got)) {
			t.Errorf("%q: Content-Length %q, body %d bytes", tc.accept, rec.Header().Get("Content-Length"), len(got))
		}
		if !tc.gzip {
			if rec.Header().Get("Content-Encoding") != "" || rec.Header().Get("Vary") != "" || string(got) != want {
				t.Errorf("%q: %v %q, want %s unencoded and no Vary", tc.accept, rec.Header(), got, want)
			}
			continue
		}
		if rec.Header().Get("Content-Encoding") != "gzip" || rec.Header().Get("Vary") != "Accept-Encoding" ||
			gunzipped(t, got) != want {
			t.Errorf("%q: %v, body %q", tc.accept, rec.Header(), got)
		}
	}
}

func TestGzipBothWaysAndErrors(t *testing.T) {
	h := newHandler(t)
	rec := doWith(t, h, "GET", "/v1/products/0", nil, http.Header{"Accept-Encoding": {"gzip"}})
	var body ErrorBody
	if rec.Code != http.StatusNotFound || rec.Header().Get("Content-Encoding") != "gzip" ||
		json.Unmarshal([]byte(gunzipped(t, rec.Body.Bytes())), &body) != nil || body.Code != codes.NotFound {
		t.Fatalf("%d %v %q", rec.Code, rec.Header(), rec.Body)
	}
	rec = doWith(t, h, "POST", "/v1/hello", gzipped(t, []byte(`{"name":"both"}`)), http.Header{
		"Content-Encoding": {"gzip"}, "Accept-Encoding": {"gzip"}})
	if rec.Code != http.StatusOK || gunzipped(t, rec.Body.Bytes()) != `{"message":"Hello, both"}` {
		t.Fatalf("%d %q", rec.Code, rec.Body)
	}
}

func TestBadEncodingsAre400And413(t *testing.T) {
	h := newHandler(t)
	for _, tc := range []struct {
		name     string
		encoding string
		body     []byte
		status   int
	}{
		{"unknown encoding", "br", []byte(`{}`), http.StatusBadRequest},
		{"not gzip", "gzip", []byte(`{"name":"plain"}`), http.StatusBadRequest},
		{"truncated gzip", "gzip", gzipped(t, []byte(`{"name":"cut"}`))[:12], http.StatusBadRequest},
		{"unpacks past the limit", "gzip", gzipped(t, bytes.Repeat([]byte(" "), MaxBodyBytes+1)),
			http.StatusRequestEntityTooLarge},
	} {
		rec := doWith(t, h, "POST", "/v1/hello", tc.body, http.Header{"Content-Encoding": {tc.encoding}})
		if rec.Code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, rec.Code, rec.Body, tc.status)
		}
	}
	// Exactly the limit unpacked still passes (spaces are insignificant JSON whitespace).
	body := append(bytes.Repeat([]byte(" "), MaxBodyBytes-len(`{"name":"x"}`)), `{"name":"x"}`...)
	rec := doWith(t, h, "POST", "/v1/hello", gzipped(t, body), http.Header{"Content-Encoding": {"gzip"}})
	if rec.Code != http.StatusOK {
		t.Fatalf("a body of exactly %d bytes unpacked: %d %s", MaxBodyBytes, rec.Code, rec.Body)
	}
}

// TestPauseSendsTheFirstPartFirst reads the raw HTTP/1.1 answer from a real
// server: headers and the first half arrive, then nothing for the pause,
// then the rest, chunked.
func TestPauseSendsTheFirstPartFirst(t *testing.T) {
	const pause = 300 * time.Millisecond
	ts := httptest.NewServer(newHandler(t))
	defer ts.Close()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	_, _ = io.WriteString(conn, "GET /v1/echo?content=paused HTTP/1.1\r\nHost: x\r\n"+
		delay.PauseHeader+": "+strconv.Itoa(int(pause.Milliseconds()))+"\r\nConnection: close\r\n\r\n")
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" ||
		resp.ContentLength != -1 {
		t.Fatalf("%d %v length %d, want 200 chunked", resp.StatusCode, resp.TransferEncoding, resp.ContentLength)
	}
	const want = `{"content":"paused"}`
	first := make([]byte, (len(want)+1)/2)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	firstAt := time.Since(start)
	if firstAt >= pause || string(first) != want[:len(first)] {
		t.Fatalf("first part %q after %v, want %q before the pause %v", first, firstAt, want[:len(first)], pause)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if restAt := time.Since(start); restAt-firstAt < pause*9/10 || string(first)+string(rest) != want {
		t.Fatalf("rest %q after %v (first part at %v), want %q a pause %v later", rest, restAt, firstAt,
			want[len(first):], pause)
	}
}

func TestPauseWithGzipSplitsTheCompressedBody(t *testing.T) {
	rec := doWith(t, newHandler(t), "GET", "/v1/echo?content=pz", nil, http.Header{
		http.CanonicalHeaderKey(delay.PauseHeader): {"1"}, "Accept-Encoding": {"gzip"}})
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Length") != "" || !rec.Flushed ||
		gunzipped(t, rec.Body.Bytes()) != `{"content":"pz"}` {
		t.Fatalf("%d %v %q", rec.Code, rec.Header(), rec.Body)
	}
	if !strings.Contains(rec.Header().Get("Content-Encoding"), "gzip") {
		t.Fatalf("Content-Encoding %q", rec.Header().Get("Content-Encoding"))
	}
}
