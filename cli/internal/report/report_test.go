package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClickHouse answers the report's queries by what their text asks for,
// and records the parameters of each.
type fakeClickHouse struct {
	mu    sync.Mutex
	calls []map[string]string // param_* of each query, plus "sql"
	rate  float64             // the calls' sample rate (0: 1, every call recorded)
	drops int                 // calls logship dropped in the window
	// unknown adds calls the operation map does not know, over two protocols.
	unknown bool
}

func (f *fakeClickHouse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sql := string(body)
	params := map[string]string{"sql": sql}
	for k, v := range r.URL.Query() {
		if name, ok := strings.CutPrefix(k, "param_"); ok {
			params[name] = v[0]
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, params)
	f.mu.Unlock()
	w.Header().Set("X-ClickHouse-Timezone", "UTC")
	rate := f.rate
	if rate == 0 {
		rate = 1
	}
	// n recorded calls, and the calls they stand for
	sampled := func(n int) string { return fmt.Sprintf("%d,%d,%g", int(float64(n)/rate+0.5), n, rate) }
	answer := func(meta string, rows ...string) {
		fmt.Fprintf(w, `{"meta":[%s],"data":[%s],"rows":%d}`, meta, strings.Join(rows, ","), len(rows))
	}
	switch {
	case sql == "SELECT 1":
		answer(`{"name":"1","type":"UInt8"}`, `[1]`)
	case strings.Contains(sql, "FROM wirelens.runs"):
		answer(`{"name":"started_ms","type":"Int64"},{"name":"ended_ms","type":"Nullable(Int64)"}`)
	case strings.Contains(sql, "toUnixTimestamp64Nano"):
		if params["run_id"] == "missing" {
			answer(`{"name":"calls","type":"UInt64"},{"name":"first_ns","type":"Int64"},{"name":"last_ns","type":"Int64"}`, `[0,0,0]`)
			return
		}
		answer(`{"name":"calls","type":"UInt64"},{"name":"first_ns","type":"Int64"},{"name":"last_ns","type":"Int64"}`,
			`[5,1795316402724249000,1795316403332854000]`)
	case strings.Contains(sql, "max_sample_rate"):
		answer(`{"name":"sampled_calls","type":"UInt64"},{"name":"calls","type":"UInt64"},`+
			`{"name":"min_sample_rate","type":"Nullable(Float64)"},{"name":"max_sample_rate","type":"Nullable(Float64)"}`,
			fmt.Sprintf(`[63,%d,%g,%g]`, int(63/rate+0.5), rate, rate))
	case strings.Contains(sql, "wirelens.logship.dropped_records"):
		answer(`{"name":"dropped_records","type":"UInt64"},{"name":"dropped_total","type":"UInt64"}`,
			fmt.Sprintf(`[%d,%d]`, f.drops, 2*f.drops))
	case strings.Contains(sql, "quantiles("):
		q := func(base float64) string {
			var v []string
			for i := 0; i < 100; i++ {
				v = append(v, fmt.Sprint(base+float64(i)*10))
			}
			return "[" + strings.Join(v, ",") + "]"
		}
		rows := []string{
			`["echo.BiStream","grpc",` + sampled(3) + `,501,` + q(400) + `]`,
			`["hello.SayHello","grpc",` + sampled(30) + `,395,` + q(300) + `]`,
			`["hello.SayHello","rest",` + sampled(30) + `,542,` + q(500) + `]`,
		}
		if f.unknown {
			rows = append(rows, `["unknown","grpc",`+sampled(50)+`,90,`+q(80)+`]`,
				`["unknown","rest",`+sampled(50)+`,120,`+q(100)+`]`)
		}
		answer(`{"name":"operation","type":"LowCardinality(String)"},{"name":"protocol","type":"LowCardinality(String)"},`+
			`{"name":"calls","type":"UInt64"},{"name":"sampled_calls","type":"UInt64"},{"name":"sample_rate","type":"Float64"},`+
			`{"name":"median_us","type":"UInt64"},{"name":"quantiles_us","type":"Array(Float64)"}`, rows...)
	case strings.Contains(sql, "duration_us DESC"):
		answer(`{"name":"timestamp","type":"DateTime64(9)"},{"name":"operation","type":"LowCardinality(String)"},`+
			`{"name":"protocol","type":"LowCardinality(String)"},{"name":"duration_us","type":"UInt64"},{"name":"trace_id","type":"String"},`+
			`{"name":"span_sampled","type":"Bool"}`,
			`["2026-11-22 03:00:02.990000000","hello.SayHello","grpc",20001,"5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed",false]`,
			`["2026-11-22 03:00:02.950515000","hello.SayHello","rest",11492,"93ed946bb5f4d49aa2968873a2ed5432",true]`,
			`["2026-11-22 03:00:02.724249000","hello.SayHello","grpc",2543,"",false]`)
	case strings.Contains(sql, "-- bytes"):
		answer(`{"name":"operation","type":"String"},{"name":"protocol","type":"String"},{"name":"req_header_b","type":"Float64"},`+
			`{"name":"req_body_b","type":"Float64"},{"name":"req_framing_b","type":"Float64"},{"name":"resp_header_b","type":"Float64"},`+
			`{"name":"resp_body_b","type":"Float64"},{"name":"resp_framing_b","type":"Float64"}`,
			`["hello.SayHello","grpc",334,15,5,68,22,5]`, `["hello.SayHello","rest",286,19,0,117,29,0]`)
	case strings.Contains(sql, "-- throughput"):
		answer(`{"name":"second","type":"DateTime"},{"name":"protocol","type":"String"},{"name":"calls","type":"UInt64"},`+
			`{"name":"sampled_calls","type":"UInt64"},{"name":"sample_rate","type":"Float32"},{"name":"errors","type":"UInt64"}`,
			`["2026-11-22 03:00:02","grpc",`+sampled(50)+`,0]`, `["2026-11-22 03:00:04","grpc",`+sampled(8)+`,1]`,
			`["2026-11-22 03:00:02","rest",`+sampled(32)+`,0]`)
	case strings.Contains(sql, "-- compare"):
		answer(`{"name":"operation","type":"String"},{"name":"a","type":"String"},{"name":"b","type":"String"},{"name":"n","type":"UInt32"}`,
			fmt.Sprintf(`[%q,%q,%q,%s]`, params["operation"], params["protocol_a"], params["protocol_b"], params["resamples"]))
	case strings.Contains(sql, "-- broken"):
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "Code: 62. DB::Exception: Syntax error: failed at position 1. (SYNTAX_ERROR)")
	default:
		answer(`{"name":"operation","type":"String"}`)
	}
}

func writeQueries(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const where = "WHERE timestamp >= {since:DateTime64(3)} AND timestamp < {until:DateTime64(3)} AND ({run_id:String} = '' OR run_id = {run_id:String})"

func testQueries(t *testing.T) string {
	return writeQueries(t, map[string]string{
		"bytes_by_operation.sql":    "-- Question: how many bytes per call?\n--\n-- bytes\nSELECT 1 " + where,
		"throughput_per_second.sql": "-- Question: how many calls per second?\n--\n-- throughput\nSELECT 1 " + where,
		"compare_protocols.sql": "-- Question: is the difference real?\n--\n-- compare\nSELECT {operation:String}, {protocol_a:String}, " +
			"{protocol_b:String}, {resamples:UInt32} " + where,
		"broken.sql":       "-- Question: does a failure stay in its section?\n--\n-- broken\nSELECT " + where,
		"empty.sql":        "-- Question: what if nothing matches?\nSELECT 1 " + where,
		"needs_x.sql":      "-- Question: what needs a threshold?\nSELECT {threshold:UInt8}",
		"questionless.sql": "SELECT 1 " + where,
	})
}

func TestBuildRunsEveryQueryAndKeepsGoingAfterAnError(t *testing.T) {
	fake := &fakeClickHouse{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	rep, err := Build(context.Background(), Options{
		ClickHouse: testClickHouse(t, srv.URL), JaegerURL: "http://jaeger:16686/", QueriesDir: testQueries(t), RunID: "dev1",
		Now: func() time.Time { return time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	// The run has no row in wirelens.runs: its window is its first and last calls, to the millisecond.
	if FormatTime(rep.Window.Since) != "2026-11-22 03:00:02.724 UTC" || FormatTime(rep.Window.Until) != "2026-11-22 03:00:03.333 UTC" {
		t.Errorf("window %s → %s", FormatTime(rep.Window.Since), FormatTime(rep.Window.Until))
	}
	if rep.ErrorCount() != 1 {
		t.Errorf("ErrorCount %d, want 1 (broken.sql)", rep.ErrorCount())
	}
	sections := map[string]*Section{}
	for _, s := range rep.AllSections() {
		sections[s.Name] = s
	}
	if len(sections) != 9 {
		t.Errorf("%d sections, want 7 saved + 2 built in", len(sections))
	}
	if e := sections["broken"].Errors; len(e) != 1 || !strings.Contains(e[0], "SYNTAX_ERROR") {
		t.Errorf("broken: %v", e)
	}
	if n := sections["needs_x"].Notes; !sections["needs_x"].Skipped || len(n) != 1 || !strings.Contains(n[0], "threshold") {
		t.Errorf("needs_x: %+v", sections["needs_x"])
	}
	if n := sections["empty"].Notes; len(n) != 1 || !strings.Contains(n[0], "No rows") {
		t.Errorf("empty: %v", n)
	}
	if sections["questionless"].Title != "questionless" {
		t.Errorf("title %q", sections["questionless"].Title)
	}
	if len(sections["latency_cdf"].Charts) != 2 || len(sections["bytes_by_operation"].Charts) != 1 ||
		len(sections["throughput_per_second"].Charts) != 1 {
		t.Error("charts missing")
	}
	// Missing streaming_efficiency.sql: a note, not an error.
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "streaming_efficiency.sql not found") {
		t.Errorf("notes %v", rep.Notes)
	}
	// compare_protocols: once, for the only operation with two protocols; grpc has the faster median.
	cmp := sections["compare_protocols"]
	if cmp.Result == nil || len(cmp.Result.Rows) != 1 || CellText(cmp.Result.Rows[0][1]) != "grpc" ||
		CellText(cmp.Result.Rows[0][2]) != "rest" || CellText(cmp.Result.Rows[0][3]) != "200" {
		t.Errorf("compare_protocols: %+v", cmp.Result)
	}
	if !strings.Contains(strings.Join(cmp.Notes, " "), "echo.BiStream: only grpc") {
		t.Errorf("compare notes %v", cmp.Notes)
	}
	// Every saved query got the window and the run as parameters.
	for _, c := range fake.calls {
		if strings.Contains(c["sql"], "-- bytes") {
			if c["since"] != "1795316402.724" || c["until"] != "1795316403.333" || c["run_id"] != "dev1" {
				t.Errorf("bytes_by_operation parameters %v", c)
			}
		}
	}
	// The slowest call has a trace id but no span (span_sampled false): no link, the reason instead.
	if len(rep.SlowCalls) != 3 || rep.SlowCalls[0].TraceURL != "" || rep.SlowCalls[0].Command != "" ||
		rep.SlowCalls[0].NoSpan != NoSpanReason ||
		rep.SlowCalls[1].TraceURL != "http://jaeger:16686/trace/93ed946bb5f4d49aa2968873a2ed5432" ||
		rep.SlowCalls[1].APIURL != "http://jaeger:16686/api/traces/93ed946bb5f4d49aa2968873a2ed5432" ||
		rep.SlowCalls[1].Command != "wirelens trace 93ed946bb5f4d49aa2968873a2ed5432" || rep.SlowCalls[2].TraceURL != "" ||
		rep.SlowCalls[2].NoSpan != "" {
		t.Errorf("slow calls %+v", rep.SlowCalls)
	}
	if notes := strings.Join(rep.Slowest.Notes, " "); !strings.Contains(notes, "1 of these 3 calls have no span") {
		t.Errorf("slowest notes %q", notes)
	}

	var text strings.Builder
	if err := WriteText(&text, rep, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== How many bytes per call? [bytes_by_operation.sql]", "== Does a failure stay in its section? [broken.sql]",
		"ERROR: Code: 62.", "note: No rows in the window.", "  run         dev1", "1 query failed",
		"hello.SayHello  grpc         30             30            1   0.395", "wirelens trace 93ed946bb5f4d49aa2968873a2ed5432",
		"Not linked (2 of 3): #1: " + NoSpanReason + "; #3: no trace id\n",
		"  sampling    none: every call was recorded (sample_rate 1), counts are exact (63 calls)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("terminal output lacks %q:\n%s", want, text.String())
		}
	}
	var tsv strings.Builder
	if err := WriteText(&tsv, rep, "tsv"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tsv.String(), "# bytes_by_operation\tHow many bytes per call?\noperation\tprotocol\treq_header_b") {
		t.Errorf("tsv output:\n%s", tsv.String())
	}

	var page strings.Builder
	if err := WriteHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if n := strings.Count(html, "<svg "); n != 4 {
		t.Errorf("%d charts in the page, want 4 (2 CDF, bytes, throughput)", n)
	}
	for _, want := range []string{"<style>", "run <code>dev1</code>", `href="http://jaeger:16686/trace/93ed946bb5f4d49aa2968873a2ed5432"`,
		`href="http://jaeger:16686/api/traces/93ed946bb5f4d49aa2968873a2ed5432"`, "ERROR: Code: 62.", "How many bytes per call?",
		`<path class="series" data-series="rest"`, `<rect class="bar"`, "streaming_efficiency.sql not found",
		`title="trace 5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed: Envoy sent no span for this call">no span: not sampled`} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(html, "/trace/5e1ec7ed5e1ec7ed5e1ec7ed5e1ec7ed") {
		t.Error("HTML links the trace of a call without a span")
	}
	// Self-contained: no scripts, no external resources.
	if regexp.MustCompile(`(?i)<script|<link|<img|\ssrc=|@import|url\(`).MatchString(html) {
		t.Error("the HTML must not load anything")
	}
}

// Calls the operation map does not know share the operation "unknown": one
// chart like any operation, but no protocol comparison (its calls went to
// unrelated paths).
func TestUnknownCallsAreOneChartAndNeverCompared(t *testing.T) {
	fake := &fakeClickHouse{unknown: true}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	rep, err := Build(context.Background(), Options{
		ClickHouse: testClickHouse(t, srv.URL), QueriesDir: testQueries(t), RunID: "dev1",
		Now: func() time.Time { return time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.AllSections() {
		switch s.Name {
		case "latency_cdf":
			if len(s.Charts) != 3 {
				t.Errorf("latency_cdf: %d charts, want one per operation, unknown included", len(s.Charts))
			}
		case "compare_protocols":
			if s.Result == nil || len(s.Result.Rows) != 1 || CellText(s.Result.Rows[0][0]) != "hello.SayHello" {
				t.Errorf("compare_protocols: %+v", s.Result)
			}
			if !strings.Contains(strings.Join(s.Notes, " "), "unknown: calls to paths the operation map does not know") {
				t.Errorf("compare notes %v", s.Notes)
			}
		}
	}
}

func TestBuildUsesTheRunsTableAndFailsForAnUnknownRun(t *testing.T) {
	srv := httptest.NewServer(&fakeClickHouse{})
	defer srv.Close()
	_, err := Build(context.Background(), Options{ClickHouse: testClickHouse(t, srv.URL), QueriesDir: t.TempDir(), RunID: "missing"})
	if !errors.Is(err, ErrNoRun) {
		t.Errorf("got %v, want ErrNoRun", err)
	}

	runs := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "FROM wirelens.runs") {
			io.WriteString(w, `{"meta":[{"name":"started_ms","type":"Int64"},{"name":"ended_ms","type":"Nullable(Int64)"}],"data":[[1795316400000,1795316460000]]}`)
			return
		}
		if strings.Contains(string(body), "toUnixTimestamp64Nano") { // a client of the run started a second earlier
			io.WriteString(w, `{"meta":[{"name":"calls","type":"UInt64"},{"name":"first_ns","type":"Int64"},{"name":"last_ns","type":"Int64"}],`+
				`"data":[[7,1795316399000000000,1795316459000000000]]}`)
			return
		}
		io.WriteString(w, `{"meta":[{"name":"x","type":"UInt8"}],"data":[]}`)
	})
	srv2 := httptest.NewServer(runs)
	defer srv2.Close()
	rep, err := Build(context.Background(), Options{ClickHouse: testClickHouse(t, srv2.URL), QueriesDir: t.TempDir(), RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Window.Since.UnixMilli() != 1795316399000 || rep.Window.Until.UnixMilli() != 1795316460001 ||
		rep.Window.Source != "wirelens.runs (started, ended), widened to the run's first and last calls" {
		t.Errorf("window %+v", rep.Window)
	}
}

func TestBuildFailsAtOnceWhenClickHouseIsDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := Build(context.Background(), Options{ClickHouse: testClickHouse(t, url), QueriesDir: t.TempDir(), Since: time.Hour})
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "ClickHouse is not reachable at "+url) {
		t.Errorf("got %v", err)
	}
}

func TestHTMLCapsLongTables(t *testing.T) {
	res := &Result{Columns: []Column{{"n", "UInt64"}}}
	for i := 0; i < maxHTMLRows+5; i++ {
		res.Rows = append(res.Rows, []any{int64(i)})
	}
	rep := &Report{Sections: []*Section{{Name: "long", Title: "Long?", Result: res}}}
	var page strings.Builder
	if err := WriteHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(page.String(), "<tr>"); n != maxHTMLRows+1 {
		t.Errorf("%d table rows, want %d and the header", n-1, maxHTMLRows)
	}
	if !strings.Contains(page.String(), "5 more rows not shown here") {
		t.Error("no note about the rows left out")
	}
}

func TestASampledReportSaysSoInItsHeaderAndSections(t *testing.T) {
	fake := &fakeClickHouse{rate: 0.1}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	rep, err := Build(context.Background(), Options{
		ClickHouse: testClickHouse(t, srv.URL), JaegerURL: "http://jaeger:16686", QueriesDir: testQueries(t), RunID: "dev1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sampling == nil || !rep.Sampling.Sampled() || rep.Sampling.SampledCalls != 63 || rep.Sampling.Calls != 630 {
		t.Fatalf("sampling %+v", rep.Sampling)
	}
	line := "sampled at 0.1: counts, throughput and byte totals are estimates (×10); percentiles over 63 sampled calls (of ~630)"
	sections := map[string]*Section{}
	for _, s := range rep.AllSections() {
		sections[s.Name] = s
	}
	for _, name := range []string{"latency_cdf", "throughput_per_second", "slowest_calls"} {
		if !strings.Contains(strings.Join(sections[name].Notes, " "), "ampled") {
			t.Errorf("%s: no note about sampling: %v", name, sections[name].Notes)
		}
	}
	// Sections without a sample_rate column say nothing.
	if n := sections["bytes_by_operation"].Notes; len(n) != 0 {
		t.Errorf("bytes_by_operation notes %v", n)
	}

	var text strings.Builder
	if err := WriteText(&text, rep, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  sampling    sampled at 0.1: counts, throughput and byte totals are estimates (×10); percentiles over 63 sampled\n" +
			"              calls (of ~630)\n",
		"hello.SayHello  grpc        300             30          0.1   0.395",
		"note: Sampled (sample_rate down to 0.1): calls, errors and byte totals are estimates, each recorded call weighted by 1/sample_rate",
		"note: Only sampled calls are listed",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("terminal output lacks %q:\n%s", want, text.String())
		}
	}
	var tsv strings.Builder
	if err := WriteText(&tsv, rep, "tsv"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tsv.String(), "# sampling: "+line+"\n") {
		t.Errorf("tsv output lacks the sampling line:\n%s", tsv.String())
	}
	var page strings.Builder
	if err := WriteHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<dt>Sampling</dt><dd class="sampled">` + line + `</dd>`,
		"(~300 calls, 30 sampled, p50 395 µs)", "Sampled: the curves are over the calls recorded."} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}

func TestSamplingLine(t *testing.T) {
	for _, c := range []struct {
		s    *Sampling
		want string
	}{
		{nil, ""},
		{&Sampling{MinRate: 1, MaxRate: 1}, ""},
		{&Sampling{SampledCalls: 1234, Calls: 1234, MinRate: 1, MaxRate: 1},
			"none: every call was recorded (sample_rate 1), counts are exact (1,234 calls)"},
		{&Sampling{SampledCalls: 1234, Calls: 12340, MinRate: 0.1, MaxRate: 0.1},
			"sampled at 0.1: counts, throughput and byte totals are estimates (×10); percentiles over 1,234 sampled calls (of ~12,340)"},
		{&Sampling{SampledCalls: 3, Calls: 14, MinRate: 0.1, MaxRate: 0.5},
			"sampled at 0.1 to 0.5: counts, throughput and byte totals are estimates (each call ×2 to ×10 by its rate); " +
				"percentiles over 3 sampled calls (of ~14)"},
		{&Sampling{SampledCalls: 3, Calls: 9, MinRate: 1.0 / 3, MaxRate: 1},
			"sampled at 0.333333 to 1: counts, throughput and byte totals are estimates (each call ×1 to ×3 by its rate); " +
				"percentiles over 3 sampled calls (of ~9)"},
	} {
		if got := c.s.Line(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.s, got, c.want)
		}
	}
}

func TestDropsShowInEveryFormatOnlyWhenCallsWereDropped(t *testing.T) {
	for _, drops := range []int{0, 1234} {
		srv := httptest.NewServer(&fakeClickHouse{drops: drops})
		rep, err := Build(context.Background(), Options{ClickHouse: testClickHouse(t, srv.URL), QueriesDir: testQueries(t)})
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		line := "1,234 calls dropped past logship"
		var text, tsv, html strings.Builder
		if err := WriteText(&text, rep, "table"); err != nil {
			t.Fatal(err)
		}
		if err := WriteText(&tsv, rep, "tsv"); err != nil {
			t.Fatal(err)
		}
		if err := WriteHTML(&html, rep); err != nil {
			t.Fatal(err)
		}
		for name, out := range map[string]string{"table": text.String(), "tsv": tsv.String(), "html": html.String()} {
			if got := strings.Contains(out, line); got != (drops > 0) {
				t.Errorf("%d drops, %s output shows the drops line: %v\n%s", drops, name, got, out[:min(len(out), 600)])
			}
		}
	}
}
