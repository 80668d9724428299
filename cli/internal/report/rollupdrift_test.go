package report

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var driftNow = time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)

func at(ago time.Duration) *time.Time {
	t := driftNow.Add(-ago)
	return &t
}

// The refreshed form as 004_rollups.sql creates it (names as the report finds them, not as it assumes).
func refreshedRollups() []rollupObject {
	return []rollupObject{
		{Name: "requests_by_minute", Engine: "ReplacingMergeTree",
			CreateQuery: "CREATE TABLE wirelens.requests_by_minute (`minute` DateTime) ENGINE = ReplacingMergeTree(as_of) ORDER BY minute"},
		{Name: "requests_by_minute_refresh", Engine: "MaterializedView", RefreshStatus: "Scheduled", LastSuccess: at(4 * time.Second),
			CreateQuery: "CREATE MATERIALIZED VIEW wirelens.requests_by_minute_refresh REFRESH EVERY 10 SECOND APPEND TO wirelens.requests_by_minute (`minute` DateTime) AS SELECT 1"},
		{Name: "requests_by_second", Engine: "ReplacingMergeTree",
			CreateQuery: "CREATE TABLE wirelens.requests_by_second (`second` DateTime) ENGINE = ReplacingMergeTree(as_of) ORDER BY second"},
		{Name: "requests_by_second_refresh", Engine: "MaterializedView", RefreshStatus: "Scheduled", LastSuccess: at(7 * time.Second),
			CreateQuery: "CREATE MATERIALIZED VIEW wirelens.requests_by_second_refresh REFRESH EVERY 10 SECOND APPEND TO wirelens.requests_by_second (`second` DateTime) AS SELECT 1"},
		// The hourly settle passes, not run since the server started (LastSuccess nil): no warning.
		{Name: "requests_by_minute_settle", Engine: "MaterializedView", RefreshStatus: "Scheduled",
			CreateQuery: "CREATE MATERIALIZED VIEW wirelens.requests_by_minute_settle REFRESH EVERY 1 HOUR APPEND TO wirelens.requests_by_minute (`minute` DateTime) AS SELECT 1"},
		{Name: "requests_by_second_settle", Engine: "MaterializedView", RefreshStatus: "Scheduled",
			CreateQuery: "CREATE MATERIALIZED VIEW wirelens.requests_by_second_settle REFRESH EVERY 1 HOUR APPEND TO wirelens.requests_by_second (`second` DateTime) AS SELECT 1"},
		// Not a rollup's view: ignored.
		{Name: "requests_from_otel_logs", Engine: "MaterializedView",
			CreateQuery: "CREATE MATERIALIZED VIEW wirelens.requests_from_otel_logs TO wirelens.requests (`x` UInt8) AS SELECT 1"},
	}
}

func oldRollups() []rollupObject {
	return []rollupObject{
		{Name: "requests_by_minute", Engine: "AggregatingMergeTree", CreateQuery: "CREATE TABLE wirelens.requests_by_minute (x UInt8) ENGINE = AggregatingMergeTree ORDER BY x"},
		{Name: "requests_by_minute_from_requests", Engine: "MaterializedView",
			CreateQuery: "CREATE MATERIALIZED VIEW wirelens.requests_by_minute_from_requests TO wirelens.requests_by_minute (`x` UInt8) AS SELECT 1"},
		{Name: "requests_by_second", Engine: "AggregatingMergeTree", CreateQuery: "CREATE TABLE wirelens.requests_by_second (x UInt8) ENGINE = AggregatingMergeTree ORDER BY x"},
		{Name: "requests_by_second_from_requests", Engine: "MaterializedView",
			CreateQuery: "CREATE MATERIALIZED VIEW wirelens.requests_by_second_from_requests TO wirelens.requests_by_second (`x` UInt8) AS SELECT 1"},
	}
}

// The cluster form (queries/schema/cluster): each rollup a Distributed table over <name>_local, the views
// writing to the _local tables.
func clusterRollups(old bool) []rollupObject {
	var out []rollupObject
	for _, t := range []string{"requests_by_minute", "requests_by_second"} {
		engine, view := "ReplacingMergeTree", rollupObject{Name: t + "_refresh", Engine: "MaterializedView",
			RefreshStatus: "Scheduled", LastSuccess: at(3 * time.Second),
			CreateQuery: "CREATE MATERIALIZED VIEW wirelens." + t + "_refresh REFRESH EVERY 10 SECOND APPEND TO wirelens." + t +
				"_local (`x` UInt8) AS SELECT 1 FROM wirelens.requests_local"}
		if old {
			engine, view = "AggregatingMergeTree", rollupObject{Name: t + "_from_requests", Engine: "MaterializedView",
				CreateQuery: "CREATE MATERIALIZED VIEW wirelens." + t + "_from_requests TO wirelens." + t +
					"_local (`x` UInt8) AS SELECT 1 FROM wirelens.requests_local"}
		}
		out = append(out,
			rollupObject{Name: t, Engine: "Distributed", CreateQuery: "CREATE TABLE wirelens." + t + " (x UInt8) " +
				"ENGINE = Distributed('wirelens', 'wirelens', '" + t + "_local', cityHash64(run_id))"},
			rollupObject{Name: t + "_local", Engine: engine, CreateQuery: "CREATE TABLE wirelens." + t + "_local (x UInt8) " +
				"ENGINE = " + engine + " ORDER BY x"},
			view)
	}
	return out
}

func with(objs []rollupObject, name string, change func(*rollupObject)) []rollupObject {
	out := append([]rollupObject(nil), objs...)
	for i := range out {
		if out[i].Name == name {
			change(&out[i])
		}
	}
	return out
}

func without(objs []rollupObject, name string) []rollupObject {
	var out []rollupObject
	for _, o := range objs {
		if o.Name != name {
			out = append(out, o)
		}
	}
	return out
}

func TestRollupDriftWarnings(t *testing.T) {
	for _, c := range []struct {
		name   string
		health rollupHealth
		source string
		want   []string // each a substring of one warning, in order; none: no warning
		notes  []string // the same for the notes; none: no note
		count  int      // how many warnings exactly (0: not checked)
	}{
		{name: "refreshed and caught up", health: rollupHealth{Objects: refreshedRollups(), Late: 0}, source: SourceRollup},
		{name: "refreshed, last refresh 50 s ago (5 periods, under the 1 min floor)",
			health: rollupHealth{Objects: with(refreshedRollups(), "requests_by_minute_refresh",
				func(o *rollupObject) { o.LastSuccess = at(50 * time.Second) }), Late: 0}, source: SourceRollup},
		{name: "old insert-fed form", health: rollupHealth{Objects: oldRollups(), Late: -1, LateErr: "no as_of"},
			source: SourceRollup,
			want: []string{"old insert-fed form: wirelens.requests_by_minute (AggregatingMergeTree, fed at insert by " +
				"wirelens.requests_by_minute_from_requests); wirelens.requests_by_second (AggregatingMergeTree, fed at insert by " +
				"wirelens.requests_by_second_from_requests). They count every record the pipeline re-sent"}},
		{name: "refreshed table but an old view still feeds it", health: rollupHealth{Objects: append(refreshedRollups(),
			rollupObject{Name: "requests_by_second_from_requests", Engine: "MaterializedView",
				CreateQuery: "CREATE MATERIALIZED VIEW wirelens.requests_by_second_from_requests TO wirelens.requests_by_second (x UInt8) AS SELECT 1"})},
			source: SourceRollup,
			want:   []string{"old insert-fed form: wirelens.requests_by_second (fed at insert by wirelens.requests_by_second_from_requests)"}},
		{name: "no refresh view", health: rollupHealth{Objects: without(without(refreshedRollups(), "requests_by_minute_refresh"),
			"requests_by_minute_settle")}, source: SourceRollup, want: []string{"Nothing refreshes wirelens.requests_by_minute"}},
		// Only the hourly settle pass left: by its views alone the report cannot tell it from an hourly refresh;
		// it does not move the watermark, so the calls it has not counted are overdue rows, a warning.
		{name: "only the settle pass writes to a rollup", health: rollupHealth{
			Objects: without(refreshedRollups(), "requests_by_minute_refresh"), Late: 90, Overdue: 80,
			Watermark: driftNow.Add(-5 * time.Minute)}, source: SourceRollup, count: 1,
			want: []string{"90 rows of this window reached wirelens.requests after the rollups' last refresh"}},
		{name: "refresh fails", health: rollupHealth{Objects: with(refreshedRollups(), "requests_by_second_refresh", func(o *rollupObject) {
			o.RefreshStatus, o.Retry = "Running", 3
			o.Exception = "Code: 60. DB::Exception: Unknown table expression identifier 'wirelens.requests'. (UNKNOWN_TABLE)\n\n0. ? @ 0x1d967133"
		})}, source: SourceRollup,
			want: []string{"The refresh of wirelens.requests_by_second fails (wirelens.requests_by_second_refresh, 3 failures in a row): " +
				"Code: 60. DB::Exception: Unknown table expression identifier 'wirelens.requests'. (UNKNOWN_TABLE). The rollup misses"}},
		{name: "refresh stopped (its cancelled refresh is no failure)", health: rollupHealth{Objects: with(refreshedRollups(),
			"requests_by_minute_refresh", func(o *rollupObject) { o.RefreshStatus, o.Exception, o.Retry = "Disabled", "cancelled", 1 })},
			source: SourceRollup, count: 1,
			want: []string{"The refresh of wirelens.requests_by_minute is stopped (wirelens.requests_by_minute_refresh is Disabled: SYSTEM STOP VIEW); SYSTEM START VIEW wirelens.requests_by_minute_refresh resumes it. The rollup misses what arrived since."}},
		{name: "refresh lags", health: rollupHealth{Objects: with(refreshedRollups(), "requests_by_minute_refresh",
			func(o *rollupObject) { o.LastSuccess = at(10 * time.Minute) })}, source: SourceRollup,
			want: []string{"The last successful refresh of wirelens.requests_by_minute (wirelens.requests_by_minute_refresh) " +
				"started 10m ago, at 2026-11-27 03:50:00.000 UTC; it runs every 10s: the rollup lags."}},
		{name: "settle pass fails", health: rollupHealth{Objects: with(refreshedRollups(), "requests_by_minute_settle", func(o *rollupObject) {
			o.RefreshStatus, o.Retry = "Running", 2
			o.Exception = "Code: 241. DB::Exception: Memory limit exceeded. (MEMORY_LIMIT_EXCEEDED)"
		})}, source: SourceRollup, count: 1,
			want: []string{"The settle pass of wirelens.requests_by_minute fails (wirelens.requests_by_minute_settle, 2 failures in a row): " +
				"Code: 241. DB::Exception: Memory limit exceeded. (MEMORY_LIMIT_EXCEEDED). Calls committed too late for the refresh " +
				"(more than 60 s after their stamp) stay uncounted until it runs again; --source raw is exact."}},
		{name: "settle pass stopped", health: rollupHealth{Objects: with(refreshedRollups(), "requests_by_second_settle",
			func(o *rollupObject) { o.RefreshStatus = "Disabled" })}, source: SourceRollup, count: 1,
			want: []string{"The settle pass of wirelens.requests_by_second is stopped (wirelens.requests_by_second_settle is Disabled"}},
		{name: "settle pass 2 h ago is fine", health: rollupHealth{Objects: with(refreshedRollups(), "requests_by_second_settle",
			func(o *rollupObject) { o.LastSuccess = at(2 * time.Hour) })}, source: SourceRollup},
		{name: "settle pass lags", health: rollupHealth{Objects: with(refreshedRollups(), "requests_by_second_settle",
			func(o *rollupObject) { o.LastSuccess = at(4 * time.Hour) })}, source: SourceRollup, count: 1,
			want: []string{"The last successful settle pass of wirelens.requests_by_second (wirelens.requests_by_second_settle) " +
				"started 4h ago, at 2026-11-27 00:00:00.000 UTC; it runs every 1h: the rollup lags."}},
		{name: "hourly refresh 2 h ago is fine", health: rollupHealth{Objects: with(refreshedRollups(), "requests_by_minute_refresh",
			func(o *rollupObject) {
				o.LastSuccess = at(2 * time.Hour)
				o.CreateQuery = strings.Replace(o.CreateQuery, "EVERY 10 SECOND", "EVERY 1 HOUR", 1)
			})}, source: SourceRollup},
		{name: "overdue rows after the watermark, --source rollup",
			health: rollupHealth{Objects: refreshedRollups(), Late: 12345, Overdue: 12000, Watermark: driftNow.Add(-8 * time.Minute)},
			source: SourceRollup,
			want: []string{"12,345 rows of this window reached wirelens.requests after the rollups' last refresh " +
				"(watermark: 2026-11-27 03:52:00.000 UTC, 8m before the report), 12,000 of them more than 30 s ago: " +
				"no refresh has counted them, so the rollups under-count this window by up to 12,345 rows; " +
				"--source raw includes them."}},
		{name: "overdue rows, auto says it stayed", health: rollupHealth{Objects: refreshedRollups(), Late: 7, Overdue: 7,
			Watermark: time.Unix(0, 0)}, source: SourceAuto,
			want: []string{"7 rows of this window reached wirelens.requests after the rollups' last refresh (watermark: none yet)",
				"--source auto still read the rollups"}},
		{name: "the last seconds only: a note", health: rollupHealth{Objects: refreshedRollups(), Late: 40, Overdue: 0,
			Watermark: driftNow.Add(-3 * time.Second)}, source: SourceAuto,
			notes: []string{"40 rows of this window arrived in the last seconds, after the rollups' last refresh " +
				"(watermark: 2026-11-27 03:59:57.000 UTC, 3s before the report): the next refresh (every 10 s) counts them; " +
				"--source raw includes them. (--source auto still read the rollups"}},
		{name: "late count failed", health: rollupHealth{Objects: refreshedRollups(), Late: -1,
			LateErr: "Unknown expression identifier `inserted_at`"}, source: SourceRollup,
			want: []string{"Could not tell whether calls of this window arrived after the rollups' last refresh: Unknown expression identifier `inserted_at`"}},
		{name: "cluster form, refreshed: Distributed over _local tables the views refresh",
			health: rollupHealth{Objects: clusterRollups(false), Late: 0}, source: SourceRollup},
		{name: "cluster form, old: insert-fed _local tables",
			health: rollupHealth{Objects: clusterRollups(true), Late: -1}, source: SourceRollup, count: 1,
			want: []string{"old insert-fed form: wirelens.requests_by_minute_local (AggregatingMergeTree, fed at insert by " +
				"wirelens.requests_by_minute_from_requests); wirelens.requests_by_second_local"}},
		{name: "no rollup tables", health: rollupHealth{Late: -1}, source: SourceRollup,
			want: []string{"wirelens.requests_by_minute and wirelens.requests_by_second are missing"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.health.Now = driftNow
			got, notes := c.health.warnings(c.source)
			if c.count > 0 && len(got) != c.count {
				t.Fatalf("%d warnings, want %d: %q", len(got), c.count, got)
			}
			for _, check := range []struct {
				what      string
				got, want []string
			}{{"warning", got, c.want}, {"note", notes, c.notes}} {
				all := strings.Join(check.got, "\n")
				if len(check.want) == 0 && len(check.got) > 0 {
					t.Fatalf("no %s expected, got:\n%s", check.what, all)
				}
				rest := all
				for _, w := range check.want {
					i := strings.Index(rest, w)
					if i < 0 {
						t.Fatalf("%s: missing %q in:\n%s", check.what, w, all)
					}
					rest = rest[i+len(w):]
				}
			}
		})
	}
}

func TestRefreshPeriod(t *testing.T) {
	for q, want := range map[string]time.Duration{
		"CREATE MATERIALIZED VIEW a.b REFRESH EVERY 10 SECOND APPEND TO a.c AS SELECT 1":              10 * time.Second,
		"CREATE MATERIALIZED VIEW a.b REFRESH EVERY 2 MINUTES OFFSET 5 SECOND TO a.c AS SELECT 1":     2 * time.Minute,
		"CREATE MATERIALIZED VIEW a.b REFRESH AFTER 1 HOUR RANDOMIZE FOR 5 MINUTE TO a.c AS SELECT 1": time.Hour,
	} {
		ok, got := rollupObject{CreateQuery: q}.refreshable()
		if !ok || got != want {
			t.Errorf("%s: %v %v, want %v", q, ok, got, want)
		}
	}
	if ok, _ := (rollupObject{CreateQuery: "CREATE MATERIALIZED VIEW a.b TO a.c AS SELECT 1"}).refreshable(); ok {
		t.Error("an insert-fed view is not refreshable")
	}
	if got := (rollupObject{CreateQuery: "CREATE MATERIALIZED VIEW wirelens.x TO `wirelens`.`requests_by_minute` (a UInt8) AS SELECT 1"}).target(); got != "requests_by_minute" {
		t.Errorf("target %q", got)
	}
	if got := (rollupObject{CreateQuery: "CREATE MATERIALIZED VIEW other.x TO other.requests_by_minute AS SELECT 1"}).target(); got != "" {
		t.Errorf("another database's table is no rollup: %q", got)
	}
}

// rollup_objects' and rollup_refreshes' answers decode: NULLs (no refresh since the server started), Unix times.
func TestDecodeRollupObjects(t *testing.T) {
	res, err := decodeJSONCompact([]byte(`{"meta":[{"name":"name","type":"String"},{"name":"engine","type":"String"},`+
		`{"name":"create_query","type":"String"},{"name":"server_now","type":"UInt32"}],"data":[`+
		`["requests_by_second_refresh","MaterializedView","CREATE MATERIALIZED VIEW ...",1795752000],`+
		`["requests_by_minute_refresh","MaterializedView","CREATE MATERIALIZED VIEW ...",1795752000]]}`), "test")
	if err != nil {
		t.Fatal(err)
	}
	objs, now, err := decodeRollupObjects(res)
	if err != nil {
		t.Fatal(err)
	}
	if !now.Equal(time.Unix(1795752000, 0)) || len(objs) != 2 || objs[0].Name != "requests_by_minute_refresh" {
		t.Fatalf("%v %+v", now, objs)
	}
	refreshes, err := decodeJSONCompact([]byte(`{"meta":[{"name":"view","type":"String"},{"name":"status","type":"String"},`+
		`{"name":"last_success","type":"Nullable(UInt32)"},{"name":"exception","type":"String"},{"name":"retry","type":"UInt64"}],`+
		`"data":[["requests_by_minute_refresh","Running",1795751990,"boom",2],["requests_by_second_refresh","Scheduled",null,"",0],`+
		`["another_view","Scheduled",1,"",0]]}`), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := addRefreshes(objs, refreshes); err != nil {
		t.Fatal(err)
	}
	if objs[0].LastSuccess == nil || objs[0].LastSuccess.Unix() != 1795751990 || objs[0].Exception != "boom" ||
		objs[0].Retry != 2 || objs[0].RefreshStatus != "Running" {
		t.Errorf("%+v", objs[0])
	}
	if objs[1].LastSuccess != nil || objs[1].RefreshStatus != "Scheduled" {
		t.Errorf("%+v", objs[1])
	}
	res.Columns = res.Columns[:3]
	if _, _, err := decodeRollupObjects(res); err == nil {
		t.Error("a missing column must be an error")
	}
	refreshes.Columns = refreshes.Columns[:2]
	if err := addRefreshes(objs, refreshes); err == nil {
		t.Error("a missing column must be an error")
	}
}

// driftClickHouse answers the drift queries (old form, or refreshed with late rows) and everything
// else as fakeClickHouse does.
type driftClickHouse struct {
	fakeClickHouse
	old              bool
	denied           bool // system.view_refreshes refused (no grant)
	pending, overdue int
	queries          []string
}

func (f *driftClickHouse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sql := string(body)
	f.queries = append(f.queries, sql)
	answer := func(meta string, rows ...string) {
		w.Header().Set("X-ClickHouse-Timezone", "UTC")
		fmt.Fprintf(w, `{"meta":[%s],"data":[%s],"rows":%d}`, meta, strings.Join(rows, ","), len(rows))
	}
	switch {
	case strings.Contains(sql, "FROM system.tables"):
		objs := refreshedRollups()
		if f.old {
			objs = oldRollups()
		}
		var rows []string
		for _, o := range objs {
			rows = append(rows, fmt.Sprintf(`[%q,%q,%q,%d]`, o.Name, o.Engine, o.CreateQuery, time.Now().Unix()))
		}
		answer(`{"name":"name","type":"String"},{"name":"engine","type":"String"},{"name":"create_query","type":"String"},`+
			`{"name":"server_now","type":"UInt32"}`, rows...)
	case strings.Contains(sql, "FROM system.view_refreshes"):
		if f.denied {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "Code: 497. DB::Exception: wirelens_reader: Not enough privileges. To execute this query, "+
				"it's necessary to have the grant SELECT ON system.view_refreshes. (ACCESS_DENIED)")
			return
		}
		var rows []string
		for _, o := range refreshedRollups() {
			if o.RefreshStatus != "" && !f.old {
				rows = append(rows, fmt.Sprintf(`[%q,%q,%d,"",0]`, o.Name, o.RefreshStatus, time.Now().Add(-2*time.Second).Unix()))
			}
		}
		answer(`{"name":"view","type":"String"},{"name":"status","type":"String"},{"name":"last_success","type":"Nullable(UInt32)"},`+
			`{"name":"exception","type":"String"},{"name":"retry","type":"UInt64"}`, rows...)
	case strings.Contains(sql, "pending_rows"):
		answer(`{"name":"watermark_ms","type":"Int64"},{"name":"pending_rows","type":"UInt64"},{"name":"overdue_rows","type":"UInt64"}`,
			fmt.Sprintf(`[%d,%d,%d]`, time.Now().Add(-3*time.Second).UnixMilli(), f.pending, f.overdue))
	default:
		r.Body = io.NopCloser(strings.NewReader(sql))
		f.fakeClickHouse.ServeHTTP(w, r)
	}
}

func TestReportFromRollupsWarnsOfDrift(t *testing.T) {
	dir := testQueries(t)
	if err := os.Mkdir(filepath.Join(dir, "rollup"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rollup", "bytes_by_operation.sql"),
		[]byte("-- Question: how many bytes per call?\n--\n-- bytes\nSELECT 1 FROM wirelens.requests_by_minute FINAL "+where), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		fake      *driftClickHouse
		source    string
		want      []string
		wantNone  bool
		noLateSQL bool
	}{
		{name: "old form", fake: &driftClickHouse{old: true}, source: SourceRollup, noLateSQL: true,
			want: []string{"WARNING: The rollups are the old insert-fed form", "# warning: The rollups are the old insert-fed form"}},
		{name: "refreshed, 42 rows overdue", fake: &driftClickHouse{pending: 42, overdue: 40}, source: SourceRollup,
			want: []string{"WARNING: 42 rows of this window reached wirelens.requests after the rollups' last refresh",
				"# warning: 42 rows of this window"}},
		{name: "refreshed, 5 rows of the last seconds: a note", fake: &driftClickHouse{pending: 5}, source: SourceRollup,
			wantNone: true, want: []string{"# note: Read from the rollups", "5 rows of this window arrived in the last seconds"}},
		{name: "refreshed, caught up", fake: &driftClickHouse{}, source: SourceRollup, wantNone: true},
		{name: "no grant on system.view_refreshes, caught up", fake: &driftClickHouse{denied: true}, source: SourceRollup,
			wantNone: true},
		{name: "no grant on system.view_refreshes, rows overdue", fake: &driftClickHouse{denied: true, pending: 9, overdue: 9},
			source: SourceRollup, want: []string{"WARNING: 9 rows of this window reached wirelens.requests",
				"Why the refreshes do not run could not be read: Code: 497. DB::Exception: wirelens_reader: Not enough privileges."}},
		{name: "raw: no drift check", fake: &driftClickHouse{old: true}, source: SourceRaw, wantNone: true, noLateSQL: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.fake)
			defer srv.Close()
			ch, err := NewClickHouse(srv.URL, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Build(context.Background(), Options{ClickHouse: ch, QueriesDir: dir, Since: time.Hour, Source: c.source})
			if err != nil {
				t.Fatal(err)
			}
			var table, tsv strings.Builder
			if err := WriteText(&table, rep, "table"); err != nil {
				t.Fatal(err)
			}
			if err := WriteText(&tsv, rep, "tsv"); err != nil {
				t.Fatal(err)
			}
			out := table.String() + tsv.String()
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("missing %q in:\n%s", w, out)
				}
			}
			if c.wantNone && (len(rep.Warnings) > 0 || strings.Contains(out, "WARNING")) {
				t.Errorf("no warning expected: %q", rep.Warnings)
			}
			lateAsked := false
			for _, q := range c.fake.queries {
				lateAsked = lateAsked || strings.Contains(q, "pending_rows")
			}
			if lateAsked == c.noLateSQL {
				t.Errorf("rollup_late asked: %v (the old form and raw need no count)", lateAsked)
			}
			for _, q := range c.fake.queries {
				var code []string // the statement without its comments
				for _, line := range strings.Split(q, "\n") {
					if !strings.HasPrefix(strings.TrimSpace(line), "--") {
						code = append(code, line)
					}
				}
				if strings.Contains(q, "pending_rows") && strings.Contains(strings.Join(code, "\n"), "FINAL") {
					t.Error("the drift check must not read the raw table with FINAL")
				}
			}
		})
	}
}
