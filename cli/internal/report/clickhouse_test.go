package report

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wirelens/wirelens/internal/cli/clitest"
)

func TestQueryEncodesParametersAndDecodesResult(t *testing.T) {
	var gotQuery map[string][]string
	var gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			t.Errorf("method %s, want POST", r.Method)
		}
		gotQuery = r.URL.Query()
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		w.Header().Set("X-ClickHouse-Timezone", "Europe/Paris")
		io.WriteString(w, `{"meta":[{"name":"operation","type":"LowCardinality(String)"},{"name":"calls","type":"UInt64"},
			{"name":"q","type":"Array(Float64)"},{"name":"g","type":"Nullable(UInt8)"}],
			"data":[["hello.SayHello",18446744073709551615,[1.5,2],null]],"rows":1}`)
	}))
	defer srv.Close()

	ch := testClickHouse(t, srv.URL+"/")
	res, err := ch.Query(context.Background(), "SELECT 1;\n", map[string]string{
		"run_id": "a b&c=d/é", "since": "1795316402.724"})
	if err != nil {
		t.Fatal(err)
	}
	if gotBody != "SELECT 1" {
		t.Errorf("body %q: want the statement without its semicolon", gotBody)
	}
	for k, want := range map[string]string{
		"param_run_id": "a b&c=d/é", "param_since": "1795316402.724", "default_format": "JSONCompact",
		"output_format_json_quote_64bit_integers": "0", "wait_end_of_query": "1"} {
		if got := gotQuery[k]; len(got) != 1 || got[0] != want {
			t.Errorf("URL parameter %s = %q, want %q", k, got, want)
		}
	}
	if len(res.Columns) != 4 || res.Columns[1].Name != "calls" || res.Columns[1].Type != "UInt64" {
		t.Fatalf("columns %+v", res.Columns)
	}
	row := res.Rows[0]
	if row[1].(json.Number).String() != "18446744073709551615" {
		t.Errorf("a UInt64 must keep all its digits, got %v", row[1])
	}
	if CellText(row[2]) != "[1.5,2]" || CellText(row[3]) != "NULL" {
		t.Errorf("cells %q %q", CellText(row[2]), CellText(row[3]))
	}
	if res.Location().String() != "Europe/Paris" {
		t.Errorf("time zone %v", res.Location())
	}
}

func TestQueryErrorShowsClickHouseMessage(t *testing.T) {
	msg := "Code: 47. DB::Exception: Unknown expression identifier `nope`. (UNKNOWN_IDENTIFIER) (version 26.9.2.1)"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-ClickHouse-Exception-Code", "47")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, msg+"\n")
	}))
	defer srv.Close()
	_, err := testClickHouse(t, srv.URL).Query(context.Background(), "SELECT nope", nil)
	var qe *QueryError
	if !errors.As(err, &qe) {
		t.Fatalf("got %v, want a QueryError", err)
	}
	if qe.Message != msg || qe.Status != 500 || qe.Code != "47" {
		t.Errorf("QueryError %+v", qe)
	}
	if !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), "UNKNOWN_IDENTIFIER") {
		t.Errorf("message %q should name the URL and carry ClickHouse's text", err)
	}
}

func TestQueryUnreachableNamesTheURL(t *testing.T) {
	url := clitest.ClosedURL(t)
	_, err := testClickHouse(t, url).Query(context.Background(), "SELECT 1", nil)
	var ue *UnreachableError
	if !errors.As(err, &ue) {
		t.Fatalf("got %v, want an UnreachableError", err)
	}
	want := "ClickHouse is not reachable at " + url + ": connection refused"
	if err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestNewClickHouseRejectsABadURL(t *testing.T) {
	_, err := NewClickHouse("ftp://127.0.0.1:8123", 0)
	if err == nil || !strings.Contains(err.Error(), "scheme must be http or https") {
		t.Errorf("got %v", err)
	}
}

func TestNewClickHouseAssumesHTTP(t *testing.T) {
	if got := testClickHouse(t, "127.0.0.1:8123").client.String(); got != "http://127.0.0.1:8123" {
		t.Errorf("endpoint %q", got)
	}
}

func testClickHouse(t *testing.T, endpoint string) *ClickHouse {
	t.Helper()
	ch, err := NewClickHouse(endpoint, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestQueryUndecodableAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "1\t2\n")
	}))
	defer srv.Close()
	_, err := testClickHouse(t, srv.URL).Query(context.Background(), "SELECT 1", nil)
	if err == nil || !strings.Contains(err.Error(), "decoding ClickHouse's answer") {
		t.Errorf("got %v", err)
	}
}
