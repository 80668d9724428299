package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelens/wirelens/internal/domain"
	"github.com/wirelens/wirelens/internal/restserver"
)

func TestExitCodes(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run(context.Background(), nil, []string{"-help"}, &out, &errb); rc != 0 {
		t.Fatalf("-help rc = %d", rc)
	}
	for _, f := range []string{"-target", "-protocol", "-operation", "-n", "-name", "-concurrency", "-trace-ids", "-timeout",
		"-run-id", "-messages", "-count", "-id", "-content", "-number"} {
		if !strings.Contains(errb.String(), f+" ") {
			t.Errorf("-help does not explain %s", f)
		}
	}
	if rc := run(context.Background(), nil, []string{"-protocol", "soap"}, &out, &errb); rc != 2 {
		t.Fatalf("bad protocol rc = %d", rc)
	}
	if rc := run(context.Background(), nil, []string{"-bogus"}, &out, &errb); rc != 2 {
		t.Fatalf("bad flag rc = %d", rc)
	}
}

func TestRESTRunWritesSummaryAndTraceIDs(t *testing.T) {
	h, err := restserver.NewHandler(domain.New())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	ids := filepath.Join(t.TempDir(), "ids.tsv")
	var out, errb bytes.Buffer
	rc := run(context.Background(), nil, []string{"-target", strings.TrimPrefix(ts.URL, "http://"),
		"-protocol", "rest", "-operation", "hello.SayHelloBig", "-n", "5", "-trace-ids", ids}, &out, &errb)
	if rc != 0 {
		t.Fatalf("rc = %d, stderr %s", rc, errb.String())
	}
	var sum map[string]any
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	if sum["calls"] != 5.0 || sum["ok"] != 5.0 || sum["errors"] != 0.0 || sum["operation"] != "hello.SayHelloBig" {
		t.Fatalf("summary = %v", sum)
	}
	data, err := os.ReadFile(ids)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "rest\t"); n != 5 {
		t.Fatalf("trace ids file:\n%s", data)
	}

	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	out.Reset()
	errb.Reset()
	if rc := run(context.Background(), nil, []string{"-target", strings.TrimPrefix(missing.URL, "http://"), "-n", "2"}, &out, &errb); rc != 1 {
		t.Fatalf("failing run rc = %d", rc)
	}
	if !strings.Contains(out.String(), `"errors":2`) || !strings.Contains(errb.String(), "HTTP 404") {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
}

func TestModelFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		rc   int
		want string
	}{
		{[]string{"-compare"}, 2, "-compare needs -clickhouse-url"},
		{[]string{"-model", "closed", "-users", "5"}, 2, "-model closed needs -duration or -n"},
		{[]string{"-model", "closed", "-think", "2s-1s", "-duration", "1s"}, 2, "-think"},
		{[]string{"-model", "open", "-duration", "1s"}, 2, "-rate must be positive"},
		{[]string{"-model", "open", "-rate", "fast", "-duration", "1s"}, 2, "-rate"},
		{[]string{"-warmup", "soon"}, 2, "-warmup"},
		{[]string{"-model", "sequential", "-concurrency", "4"}, 2, "one call at a time"},
		{[]string{"-progress", "sometimes"}, 2, "-progress"},
		{[]string{"-clickhouse-url", "ftp://x"}, 2, "scheme must be http"},
	} {
		var out, errb bytes.Buffer
		if rc := run(context.Background(), nil, tc.args, &out, &errb); rc != tc.rc || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: rc %d, stderr %q; want rc %d mentioning %q", tc.args, rc, errb.String(), tc.rc, tc.want)
		}
	}
}

func TestClosedModelRunWithWarmup(t *testing.T) {
	h, err := restserver.NewHandler(domain.New())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	defer ts.Close()
	var out, errb bytes.Buffer
	rc := run(context.Background(), nil, []string{"-target", strings.TrimPrefix(ts.URL, "http://"),
		"-protocol", "rest", "-operation", "hello.SayHello", "-model", "closed", "-users", "3", "-spawn-rate", "30/s",
		"-think", "10ms-20ms", "-duration", "300ms", "-warmup", "4", "-progress", "100ms"}, &out, &errb)
	if rc != 0 {
		t.Fatalf("rc = %d, stderr %s", rc, errb.String())
	}
	var sum map[string]any
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	runID, _ := sum["run_id"].(string)
	if sum["model"] != "closed" || sum["warmup_calls"] != 4.0 || sum["calls"].(float64) < 5 ||
		!strings.HasPrefix(runID, "loadgen-") || sum["warmup_run_id"] != runID+"-warmup" {
		t.Fatalf("summary = %v", sum)
	}
	if !strings.Contains(errb.String(), "users 3/3") || !strings.Contains(errb.String(), "done ") {
		t.Fatalf("progress on stderr: %q", errb.String())
	}
}
