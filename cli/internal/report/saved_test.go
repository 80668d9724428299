package report

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const sampleQuery = `-- Question: for each operation, how does each protocol compare on latency
-- (p50/p95/p99)?
--
-- Parameters:
--   {since:DateTime64(3)}  window start
--   {ignored:String}       a comment is not the query
SELECT {operation:String} AS op, count()
FROM wirelens.requests
WHERE timestamp >= {since:DateTime64(3)} AND timestamp < { until : DateTime64(3) }
  AND run_id = {run_id:String} AND operation = {operation:String};
`

func TestParseSavedQuery(t *testing.T) {
	q := ParseSavedQuery("x", "x.sql", sampleQuery)
	if q.Question != "for each operation, how does each protocol compare on latency (p50/p95/p99)?" {
		t.Errorf("question %q", q.Question)
	}
	if q.Title() != "For each operation, how does each protocol compare on latency (p50/p95/p99)?" {
		t.Errorf("title %q", q.Title())
	}
	if want := []string{"operation", "since", "until", "run_id"}; !reflect.DeepEqual(q.Params, want) {
		t.Errorf("params %v, want %v", q.Params, want)
	}
	if q := ParseSavedQuery("bare", "bare.sql", "SELECT 1"); q.Title() != "bare" || q.Params != nil {
		t.Errorf("a query without a question: %+v", q)
	}
}

func TestLoadSavedQueriesReadsOnlyTopLevelSQL(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "schema"), 0o755)
	for name, text := range map[string]string{"b.sql": "-- Question: b?\nSELECT 2", "a.sql": "SELECT 1", "notes.md": "x",
		"schema/001.sql": "CREATE TABLE t (x UInt8)"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	qs, err := LoadSavedQueries(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || qs[0].Name != "a" || qs[1].Name != "b" || qs[1].Question != "b?" {
		t.Errorf("got %+v", qs)
	}
	if _, err := LoadSavedQueries(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing directory must be an error")
	}
}

// The repository's own saved queries and the built-in ones follow the conventions.
func TestRepositoryAndBuiltinQueriesHaveQuestions(t *testing.T) {
	qs, err := LoadSavedQueries(filepath.Join("..", "..", "..", "queries"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range BuiltinNames() {
		q, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	if len(qs) < 5 {
		t.Fatalf("only %d queries", len(qs))
	}
	for _, q := range qs {
		if q.Question == "" {
			t.Errorf("%s: no -- Question: line", q.Path)
		}
		if len(q.Params) == 0 {
			t.Errorf("%s: no query parameters", q.Path)
		}
	}
}

func TestPairParams(t *testing.T) {
	for _, c := range []struct {
		extra []string
		ok    bool
		want  [2]string
	}{
		{[]string{"operation", "protocol_a", "protocol_b", "resamples"}, true, [2]string{"protocol_a", "protocol_b"}},
		{[]string{"operation", "candidate", "baseline"}, true, [2]string{"baseline", "candidate"}},
		{[]string{"operation", "other_protocol", "base_protocol", "n_resamples"}, true, [2]string{"base_protocol", "other_protocol"}},
		{[]string{"operation", "protocol"}, false, [2]string{}},
		{[]string{"threshold"}, false, [2]string{}},
	} {
		p, ok := pairParams(c.extra)
		if ok != c.ok || (ok && p.protocols != c.want) {
			t.Errorf("pairParams(%v) = %+v, %v", c.extra, p, ok)
		}
	}
}

func TestParseSinceAndTime(t *testing.T) {
	for in, want := range map[string]string{"30s": "30s", "15m": "15m0s", "2h": "2h0m0s", "1d": "24h0m0s", "1h30m": "1h30m0s"} {
		d, err := ParseSince(in)
		if err != nil || d.String() != want {
			t.Errorf("ParseSince(%q) = %v, %v", in, d, err)
		}
	}
	for _, bad := range []string{"", "1", "-1h", "0s", "1y"} {
		if _, err := ParseSince(bad); err == nil {
			t.Errorf("ParseSince(%q) accepted", bad)
		}
	}
	for in, want := range map[string]string{
		"2026-11-22T03:00:02Z":      "2026-11-22 03:00:02.000 UTC",
		"2026-11-22T04:00:02+01:00": "2026-11-22 03:00:02.000 UTC",
		"2026-11-22 03:00:02.5":     "2026-11-22 03:00:02.500 UTC",
		"2026-11-22":                "2026-11-22 00:00:00.000 UTC",
		"1795316402.724":            "2026-11-22 03:00:02.724 UTC",
	} {
		got, err := ParseTime(in)
		if err != nil || FormatTime(got) != want {
			t.Errorf("ParseTime(%q) = %v, %v; want %s", in, FormatTime(got), err, want)
		}
	}
	if _, err := ParseTime("yesterday"); err == nil {
		t.Error("ParseTime accepted yesterday")
	}
}
