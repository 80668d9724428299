package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelens/wirelens/internal/cli/clitest"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpExplainsEveryFlag(t *testing.T) {
	code, out, _ := runCmd(t, "--help")
	if code != 0 || !strings.Contains(out, "report") || !strings.Contains(out, "trace") || !strings.Contains(out, "WIRELENS_CLICKHOUSE_URL") {
		t.Errorf("wirelens --help: %d\n%s", code, out)
	}
	code, out, _ = runCmd(t, "report", "--help")
	for _, flag := range []string{"--run ID", "--since DURATION", "--until TIME", "--html FILE", "--clickhouse-url URL", "--jaeger-url URL",
		"--queries DIR", "--format table", "--timeout", "--resamples"} {
		if code != 0 || !strings.Contains(out, flag) {
			t.Errorf("report --help lacks %q (exit %d)", flag, code)
		}
	}
	code, out, _ = runCmd(t, "help", "trace")
	for _, flag := range []string{"Usage: wirelens trace ID", "--jaeger-url URL", "--all-tags", "--timeout"} {
		if code != 0 || !strings.Contains(out, flag) {
			t.Errorf("help trace lacks %q (exit %d)", flag, code)
		}
	}
}

func TestBadUsageExits2(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"report", "--bogus"},
		{"report", "--run", "x", "--since", "1h"},
		{"report", "--since", "soon"},
		{"report", "--until", "yesterday"},
		{"report", "--format", "json"},
		{"report", "extra"},
		{"query"},
		{"query", "a", "b"},
		{"query", "a", "--run", "x", "--since", "1h"},
		{"query", "a", "--param", "novalue"},
		{"trace"},
		{"trace", "a", "b"},
		{"trace", "xyz!"},
	} {
		code, _, errOut := runCmd(t, args...)
		if code != 2 || !strings.Contains(errOut, "Usage: wirelens") {
			t.Errorf("wirelens %v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestUnreachableServicesExit1NamingTheURL(t *testing.T) {
	url := clitest.ClosedURL(t)
	code, _, errOut := runCmd(t, "report", "--clickhouse-url", url, "--queries", t.TempDir())
	if want := "wirelens: ClickHouse is not reachable at " + url + ": connection refused\n"; code != 1 || errOut != want {
		t.Errorf("report: exit %d, stderr %q, want %q", code, errOut, want)
	}
	t.Setenv("WIRELENS_JAEGER_URL", url)
	code, _, errOut = runCmd(t, "trace", "4bf92f3577b34da6a3ce929d0e0e4736")
	if want := "wirelens: Jaeger is not reachable at " + url + ": connection refused\n"; code != 1 || errOut != want {
		t.Errorf("trace: exit %d, stderr %q, want %q", code, errOut, want)
	}
}

// A tiny ClickHouse stand-in: no calls for the built-in queries, one row for
// the saved ones, an error for the one marked broken.
func TestReportWritesHTMLAndExits1OnAQueryError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "broken") {
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, "Code: 62. DB::Exception: Syntax error (SYNTAX_ERROR)")
			return
		}
		if strings.Contains(string(body), "wirelens.requests") { // the report's own queries: no calls
			io.WriteString(w, `{"meta":[{"name":"x","type":"UInt8"}],"data":[]}`)
			return
		}
		io.WriteString(w, `{"meta":[{"name":"x","type":"UInt8"}],"data":[[1]]}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ok.sql"), []byte("-- Question: does it work?\nSELECT {since:DateTime64(3)}"), 0o644)
	html := filepath.Join(t.TempDir(), "report.html")
	t.Setenv("WIRELENS_CLICKHOUSE_URL", srv.URL)
	t.Setenv("WIRELENS_QUERIES_DIR", dir)
	code, out, errOut := runCmd(t, "report", "--since", "15m", "--html", html)
	if code != 0 || !strings.Contains(out, "== Does it work? [ok.sql]") || !strings.Contains(errOut, "wrote "+html) {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if data, err := os.ReadFile(html); err != nil || !strings.Contains(string(data), "Does it work?") {
		t.Errorf("HTML: %v", err)
	}

	os.WriteFile(filepath.Join(dir, "zz_broken.sql"), []byte("-- Question: broken?\nSELECT broken"), 0o644)
	code, out, errOut = runCmd(t, "report", "--since", "15m", "--format", "tsv")
	if code != 1 || !strings.Contains(out, "# ERROR: Code: 62.") || !strings.Contains(out, "# ok\tDoes it work?\nx\n1\n") ||
		!strings.Contains(errOut, "1 query failed") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// The query command sends the saved query with its parameters and the format
// asked for, and prints the answer as ClickHouse wrote it.
func TestQueryRunsOneSavedQueryWithItsParameters(t *testing.T) {
	var got map[string]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = map[string]string{"sql": string(body)}
		for k, v := range r.URL.Query() {
			got[k] = v[0]
		}
		io.WriteString(w, "n\n42\n")
	}))
	defer srv.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pair.sql"), []byte("-- Question: which?\n"+
		"SELECT {operation:String}, {resamples:UInt16} WHERE ts >= {since:DateTime64(3)} AND run_id = {run_id:String}"), 0o644)
	t.Setenv("WIRELENS_QUERIES_DIR", dir)
	t.Setenv("WIRELENS_CLICKHOUSE_URL", srv.URL)

	code, _, errOut := runCmd(t, "query", "pair", "--since", "15m")
	if code != 2 || !strings.Contains(errOut, "pair needs --param operation=...") {
		t.Errorf("missing parameter: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runCmd(t, "query", "pair", "--param", "operation=hello.SayHello", "--param", "run_id=r1",
		"--format", "TabSeparatedWithNames")
	if code != 0 || out != "n\n42\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if got["default_format"] != "TabSeparatedWithNames" || got["param_operation"] != "hello.SayHello" ||
		got["param_resamples"] != "200" || got["param_run_id"] != "r1" || got["param_since"] == "" ||
		!strings.Contains(got["sql"], "{operation:String}") {
		t.Errorf("request: %v", got)
	}
	code, _, errOut = runCmd(t, "query", "nosuch")
	if code != 1 || !strings.Contains(errOut, `no saved query "nosuch"`) || !strings.Contains(errOut, "known: pair") {
		t.Errorf("unknown query: exit %d, stderr %q", code, errOut)
	}
}

func TestInjectHandsOverToTheCheckoutsInjector(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".venv", "bin", "python")); err != nil {
		t.Skip("no .venv in this checkout (make venv)")
	}
	t.Setenv("WIRELENS_HOME", root)
	code, out, _ := runCmd(t, "inject", "--help")
	if code != 0 || !strings.Contains(out, "--descriptor-set") || !strings.Contains(out, "--remove") {
		t.Fatalf("wirelens inject --help: exit %d, output:\n%s", code, out)
	}
	code, _, errOut := runCmd(t, "inject", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("a missing config: exit %d, stderr:\n%s", code, errOut)
	}

	t.Setenv("WIRELENS_HOME", t.TempDir())
	code, _, errOut = runCmd(t, "inject", "envoy.yaml")
	if code != 1 || !strings.Contains(errOut, "make venv") {
		t.Fatalf("without a checkout: exit %d, stderr:\n%s", code, errOut)
	}
}

func TestTraceEndsWithTheLinkToJaegersUI(t *testing.T) {
	fixture, err := os.ReadFile(filepath.Join("..", "..", "internal", "trace", "testdata", "trace.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/traces/4bf92f3577b34da6a3ce929d0e0e4736" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Write(fixture)
	}))
	defer srv.Close()
	code, out, errOut := runCmd(t, "trace", "4BF92F3577B34DA6A3CE929D0E0E4736", "--jaeger-url", srv.URL+"/")
	want := "\nIn Jaeger's UI: " + srv.URL + "/trace/4bf92f3577b34da6a3ce929d0e0e4736\n"
	if code != 0 || !strings.HasSuffix(out, want) {
		t.Errorf("trace: exit %d, stderr %q; stdout does not end with %q:\n%s", code, errOut, want, out)
	}
}
