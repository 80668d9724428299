package report

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// whatIfColumns are what_if_protocol.sql's columns, in order (tests/unit/test_queries.py pins them).
var whatIfColumns = strings.Fields(`operation protocol calls sampled_calls sample_rate counterfactual_rate
	estimated_calls measured_b rest_b rest_proto_b grpc_b grpc_web_b grpc_web_text_b
	rest_ratio rest_ratio_low rest_ratio_high rest_proto_ratio rest_proto_ratio_low rest_proto_ratio_high
	grpc_ratio grpc_ratio_low grpc_ratio_high grpc_web_ratio grpc_web_ratio_low grpc_web_ratio_high
	grpc_web_text_ratio grpc_web_text_ratio_low grpc_web_text_ratio_high no_estimate`)

// whatIfFake answers what_if_protocol with rows (JSON arrays of the columns
// above) and every other query as fakeClickHouse does; it keeps the what-if
// query's parameters.
type whatIfFake struct {
	fakeClickHouse
	rows   []string
	params map[string]string
}

func (f *whatIfFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sql := string(body)
	if !strings.Contains(sql, "counterfactual_reason") {
		r.Body = io.NopCloser(strings.NewReader(sql))
		f.fakeClickHouse.ServeHTTP(w, r)
		return
	}
	f.params = map[string]string{}
	for k, v := range r.URL.Query() {
		if name, ok := strings.CutPrefix(k, "param_"); ok {
			f.params[name] = v[0]
		}
	}
	var meta []string
	for _, c := range whatIfColumns {
		typ := "Nullable(Float64)"
		switch c {
		case "operation", "protocol", "no_estimate":
			typ = "String"
		case "calls", "sampled_calls", "estimated_calls":
			typ = "UInt64"
		}
		meta = append(meta, fmt.Sprintf(`{"name":%q,"type":%q}`, c, typ))
	}
	w.Header().Set("X-ClickHouse-Timezone", "UTC")
	fmt.Fprintf(w, `{"meta":[%s],"data":[%s],"rows":%d}`, strings.Join(meta, ","), strings.Join(f.rows, ","), len(f.rows))
}

// The demo's SayHello over gRPC (own: grpc) and over REST (own: rest), a
// stream without rest-proto, and an operation whose calls were all too large.
var whatIfRows = []string{
	`["hello.SayHello","grpc",20,20,1,1,20,37,48,27,37,37,52,1.297,1.28,1.32,0.73,0.73,0.73,1,1,1,1,1,1,1.405,1.405,1.405,""]`,
	`["hello.SayHello","rest",300,30,0.1,0.5,12,48,48,27,37,37,52,1,1,1,0.563,0.56,0.57,0.771,0.77,0.772,0.771,0.77,0.772,1.083,1.08,1.09,"not_ok: 2"]`,
	`["echo.BiStream","grpc",1,1,1,1,1,85780,113780,null,85780,85780,114376,1.326,1.326,1.326,null,null,null,1,1,1,1,1,1,1.333,1.333,1.333,""]`,
	`["catalog.ListProducts","rest",60,60,1,1,0,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,"too_large: 60"]`,
}

// whatIfQueries is a queries directory with the real what_if_protocol.sql.
func whatIfQueries(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "..", "queries", queryWhatIf+".sql"))
	if err != nil {
		t.Fatal(err)
	}
	return writeQueries(t, map[string]string{queryWhatIf + ".sql": string(text)})
}

func buildWhatIf(t *testing.T, fake *whatIfFake, resamples int) (*Report, *Section) {
	t.Helper()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	rep, err := Build(context.Background(), Options{ClickHouse: testClickHouse(t, srv.URL), QueriesDir: whatIfQueries(t),
		RunID: "dev1", Resamples: resamples, Now: func() time.Time { return time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Sections {
		if s.Name == queryWhatIf {
			return rep, s
		}
	}
	t.Fatalf("no %s section in %+v", queryWhatIf, rep.Sections)
	return nil, nil
}

func TestWhatIfSectionTableChartAndCaveatInEveryFormat(t *testing.T) {
	fake := &whatIfFake{rows: whatIfRows}
	rep, sec := buildWhatIf(t, fake, 50)
	// The query runs once over the window, with the report's resamples.
	if fake.params["resamples"] != "50" || fake.params["run_id"] != "dev1" || fake.params["since"] == "" {
		t.Errorf("parameters %v", fake.params)
	}
	if sec.Skipped || len(sec.Errors) > 0 || sec.Caveat != WhatIfCaveat {
		t.Fatalf("section %+v", sec)
	}
	if !strings.Contains(strings.Join(sec.Params, " "), `resamples="50"`) {
		t.Errorf("params shown %v", sec.Params)
	}
	if len(sec.Charts) != 1 {
		t.Fatalf("%d charts, want 1", len(sec.Charts))
	}
	notes := strings.Join(sec.Notes, "\n")
	for _, want := range []string{"Sampled (sample_rate down to 0.1)", "counterfactual_rate down to 0.5",
		"× the ratio to the measured protocol's own"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}

	var text strings.Builder
	if err := WriteText(&text, rep, "table"); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{
		"[what_if_protocol.sql]\n  " + WhatIfCaveat + "\n",
		"not_ok: 2", "too_large: 60",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%s", want, out)
		}
	}
	for _, row := range []string{
		// gRPC measured: rest with its interval, grpc its own, grpc-web-text a single value
		`hello\.SayHello +grpc +20 +20 +37 +48 B ×1\.30 \(1\.28–1\.32\) +27 B ×0\.73 +37 B \(own\) +37 B ×1\.00 +52 B ×1\.41 *\n`,
		// REST measured
		`hello\.SayHello +rest +300 +12 +48 +48 B \(own\) +27 B ×0\.56 \(0\.56–0\.57\) +37 B ×0\.77 `,
		// a stream has no rest-proto (NULL)
		`echo\.BiStream +grpc +1 +1 +85780 +113,780 B ×1\.33 +NULL +85,780 B \(own\) `,
		// no estimate at all
		`catalog\.ListProducts +rest +60 +0 +NULL +NULL +NULL +NULL +NULL +NULL +too_large: 60\n`,
	} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("terminal output lacks a row matching %s:\n%s", row, out)
		}
	}

	// TSV is for programs: every column of the query, numbers as numbers.
	var tsv strings.Builder
	if err := WriteText(&tsv, rep, "tsv"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tsv.String(), "# "+WhatIfCaveat+"\n"+strings.Join(whatIfColumns, "\t")+"\n") ||
		!strings.Contains(tsv.String(), "hello.SayHello\tgrpc\t20\t20\t1\t1\t20\t37\t48\t27\t37\t37\t52\t1.297\t1.28\t1.32") {
		t.Errorf("tsv output:\n%s", tsv.String())
	}

	var page strings.Builder
	if err := WriteHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	for _, want := range []string{`<p class="caveat">` + WhatIfCaveat + `</p>`, `class="chart bars"`,
		`<g class="panel" data-panel="hello.SayHello · measured over grpc (20 estimated calls)">`,
		`<rect class="bar" data-series="body bytes per call"`, "52 B  ×1.41", "37 B  own", "48 B ×1.30 (1.28–1.32)",
		"Each panel has its own scale. " + WhatIfCaveat} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// Only operations with an estimate get a panel.
	if strings.Contains(html, `data-panel="catalog.ListProducts`) {
		t.Error("a panel for an operation without an estimate")
	}
}

func TestWhatIfWithoutAnyEstimateSaysWhyAndDrawsNothing(t *testing.T) {
	_, sec := buildWhatIf(t, &whatIfFake{rows: whatIfRows[3:]}, 0)
	if len(sec.Charts) != 0 {
		t.Errorf("%d charts, want none", len(sec.Charts))
	}
	if !strings.Contains(strings.Join(sec.Notes, " "), "No call in the window has an estimate") {
		t.Errorf("notes %v", sec.Notes)
	}
	// No rows at all: the usual note, still the caveat.
	_, sec = buildWhatIf(t, &whatIfFake{}, 0)
	if sec.Caveat != WhatIfCaveat || !strings.Contains(strings.Join(sec.Notes, " "), "No rows in the window.") {
		t.Errorf("section %+v", sec)
	}
}

func TestWhatIfNamesTheColumnsItLacks(t *testing.T) {
	sec := &Section{Name: queryWhatIf, Result: &Result{Columns: []Column{{"operation", "String"}, {"protocol", "String"}},
		Rows: [][]any{{"a", "rest"}}}}
	addCharts(sec)
	if len(sec.Charts) != 0 || sec.Table != nil ||
		!strings.Contains(strings.Join(sec.Notes, " "), "lacks the columns calls, estimated_calls, measured_b") {
		t.Errorf("section %+v", sec)
	}
}

func TestFormatRatioShowsTheIntervalOnlyWhenItIsOne(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		e    whatIfEncoding
		want string
	}{
		{whatIfEncoding{ratio: 1.297, low: 1.28, high: 1.32}, "×1.30 (1.28–1.32)"},
		{whatIfEncoding{ratio: 1.297, low: 1.296, high: 1.298}, "×1.30"},
		{whatIfEncoding{ratio: 0.5, low: nan, high: nan}, "×0.50"},
		{whatIfEncoding{ratio: nan, low: nan, high: nan}, ""},
	} {
		if got := formatRatio(c.e); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
	if OwnEncoding("rest-transcoded") != "rest" || OwnEncoding("grpc-web") != "grpc-web" {
		t.Error("OwnEncoding")
	}
}
