package procmetrics

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

func TestParseStatHandlesSpacesAndParensInComm(t *testing.T) {
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 7 0 123456 104857600 2048 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0"
	s, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	want := Sample{Comm: "a (b) c", PPID: 1, PGID: 4242, UserTicks: 250, SysTicks: 75, Threads: 7,
		StartTicks: 123456, VSizeBytes: 104857600, RSSBytes: 2048 * int64(os.Getpagesize())}
	if s != want {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	if s.UserSeconds() != 2.5 || s.SystemSeconds() != 0.75 {
		t.Fatalf("seconds %v %v", s.UserSeconds(), s.SystemSeconds())
	}
}

func TestReadsThisProcessAndItsGroupFromTheStackPidFiles(t *testing.T) {
	pid := os.Getpid()
	p := Proc{}
	self, err := p.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	if self.RSSBytes <= 0 || self.Threads <= 0 || self.PGID <= 0 {
		t.Fatalf("implausible sample %+v", self)
	}
	dir := t.TempDir()
	record := `{"pid": ` + strconv.Itoa(self.PGID) + `, "argv0": "x"}`
	if err := os.WriteFile(filepath.Join(dir, "tests.pid"), []byte(record), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "broken.pid"), []byte("{"), 0o644)
	groups, err := StackGroups(dir)
	if err != nil || len(groups) != 1 || groups[0] != (Group{Service: "tests", PGID: self.PGID}) {
		t.Fatalf("groups %v %v", groups, err)
	}
	samples := p.SampleGroups(groups, nil)
	found := false
	for _, s := range samples {
		if s.Service != "tests" || s.PGID != self.PGID {
			t.Fatalf("sample outside the group: %+v", s)
		}
		found = found || s.PID == pid
	}
	if !found {
		t.Fatalf("this process (pid %d) not among %d samples", pid, len(samples))
	}
}

func TestMetricsShape(t *testing.T) {
	boot := time.Unix(1_700_000_000, 0)
	now := boot.Add(time.Hour)
	md := Metrics([]Sample{{Service: "envoy", PID: 7, PPID: 1, Comm: "envoy", UserTicks: 150, SysTicks: 50,
		Threads: 9, StartTicks: 200, RSSBytes: 1 << 20, VSizeBytes: 1 << 30}}, boot, now)
	if md.ResourceMetrics().Len() != 1 {
		t.Fatal("one resource per process")
	}
	rm := md.ResourceMetrics().At(0)
	res := rm.Resource().Attributes().AsRaw()
	if res["service.name"] != "envoy" || res["process.pid"] != int64(7) {
		t.Fatalf("resource %v", res)
	}
	ms := rm.ScopeMetrics().At(0).Metrics()
	byName := map[string]pmetric.Metric{}
	for i := 0; i < ms.Len(); i++ {
		byName[ms.At(i).Name()] = ms.At(i)
	}
	cpu := byName["process.cpu.time"]
	if cpu.Type() != pmetric.MetricTypeSum || !cpu.Sum().IsMonotonic() ||
		cpu.Sum().AggregationTemporality() != pmetric.AggregationTemporalityCumulative || cpu.Unit() != "s" {
		t.Fatalf("process.cpu.time must be a cumulative monotonic sum in s")
	}
	got := map[string]float64{}
	for i := 0; i < cpu.Sum().DataPoints().Len(); i++ {
		dp := cpu.Sum().DataPoints().At(i)
		state, _ := dp.Attributes().Get("state")
		got[state.AsString()] = dp.DoubleValue()
		if !dp.StartTimestamp().AsTime().Equal(boot.Add(2 * time.Second)) {
			t.Fatalf("start %v", dp.StartTimestamp().AsTime())
		}
	}
	if got["user"] != 1.5 || got["system"] != 0.5 || len(got) != 2 {
		t.Fatalf("cpu points %v", got)
	}
	rss := byName["process.memory.usage"]
	if rss.Type() != pmetric.MetricTypeGauge || rss.Gauge().DataPoints().At(0).IntValue() != 1<<20 || rss.Unit() != "By" {
		t.Fatal("process.memory.usage must be a gauge of bytes")
	}
}
