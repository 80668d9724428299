package logship

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
)

// fakeCollector records what it accepted; it refuses while down is set.
type fakeCollector struct {
	mu       sync.Mutex
	down     bool
	attempts int
	got      []string // the "n" attribute of each accepted record, in order
	batches  []plog.Logs
}

func (c *fakeCollector) Export(_ context.Context, logs plog.Logs) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts++
	if c.down {
		return errors.New("unavailable")
	}
	c.batches = append(c.batches, logs)
	rls := logs.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			recs := sls.At(j).LogRecords()
			for k := 0; k < recs.Len(); k++ {
				v, _ := recs.At(k).Attributes().Get("n")
				c.got = append(c.got, v.AsString())
			}
		}
	}
	return nil
}

func (c *fakeCollector) setDown(down bool) {
	c.mu.Lock()
	c.down = down
	c.mu.Unlock()
}

func (c *fakeCollector) received() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

func lineN(n int) string {
	return fmt.Sprintf(`{"time":"1700000000.%09d","trace_id":"0af7651916cd43dd8448eb211c80319c","span_id":"b7ad6b7169203331",`+
		`"body":"POST /v1/hello HTTP/1.1 200","attributes":{"n":"%d","http.response.status_code":200,"envoy.upstream_service_time_ms":null}}`+"\n", n, n)
}

func appendLines(t *testing.T, path string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := from; i < to; i++ {
		if _, err := f.WriteString(lineN(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func want(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func start(t *testing.T, cfg Config) (stop func() error) {
	t.Helper()
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Millisecond
	}
	cfg.MinBackoff, cfg.MaxBackoff = time.Millisecond, 10*time.Millisecond
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() error {
		cancel()
		err := <-done
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond) // polling interval under a deadline
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestShipsEveryLineOnceInOrderAndConvertsTheRecord(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.jsonl")
	appendLines(t, path, 0, 2500)
	c := &fakeCollector{}
	stop := start(t, Config{Path: path, Exporter: c, Resource: map[string]string{"service.name": "wirelens-envoy"}})
	waitFor(t, "2500 records", func() bool { return len(c.received()) >= 2500 })
	appendLines(t, path, 2500, 2600)
	waitFor(t, "2600 records", func() bool { return len(c.received()) >= 2600 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := c.received(); !equal(got, want(0, 2600)) {
		t.Fatalf("got %d records, not 0..2599 in order", len(got))
	}
	if len(c.batches) < 3 { // 1000 records per export at most
		t.Fatalf("%d batches for 2600 records", len(c.batches))
	}
	rl := c.batches[0].ResourceLogs().At(0)
	if v, _ := rl.Resource().Attributes().Get("service.name"); v.AsString() != "wirelens-envoy" {
		t.Fatalf("resource: %v", rl.Resource().Attributes().AsRaw())
	}
	rec := rl.ScopeLogs().At(0).LogRecords().At(1)
	if !rec.Timestamp().AsTime().Equal(time.Unix(1700000000, 1)) {
		t.Fatalf("timestamp %v", rec.Timestamp().AsTime())
	}
	if rec.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || rec.SpanID().String() != "b7ad6b7169203331" {
		t.Fatalf("ids %s %s", rec.TraceID(), rec.SpanID())
	}
	if rec.Body().AsString() != "POST /v1/hello HTTP/1.1 200" {
		t.Fatalf("body %q", rec.Body().AsString())
	}
	attrs := rec.Attributes().AsRaw()
	if attrs["http.response.status_code"] != "200" || attrs["envoy.upstream_service_time_ms"] != Missing {
		t.Fatalf("attributes %v", attrs)
	}
	cp, err := loadCheckpoint(path + ".checkpoint")
	if err != nil || cp == nil {
		t.Fatalf("checkpoint: %v %v", cp, err)
	}
	fi, _ := os.Stat(path)
	if cp.Offset != fi.Size() {
		t.Fatalf("checkpoint at %d, file has %d bytes", cp.Offset, fi.Size())
	}
}

func TestCollectorDownNothingSkippedAndCheckpointWaits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.jsonl")
	appendLines(t, path, 0, 10)
	c := &fakeCollector{}
	c.setDown(true)
	stop := start(t, Config{Path: path, Exporter: c})
	waitFor(t, "retries", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.attempts > 5 })
	appendLines(t, path, 10, 20)
	cp, _ := loadCheckpoint(path + ".checkpoint")
	if cp == nil || cp.Offset != 0 {
		t.Fatalf("checkpoint moved while the Collector refused: %+v", cp)
	}
	c.setDown(false)
	waitFor(t, "20 records", func() bool { return len(c.received()) >= 20 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := c.received(); !equal(got, want(0, 20)) {
		t.Fatalf("got %v", got)
	}
}

func TestRestartResumesFromTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.jsonl")
	appendLines(t, path, 0, 50)
	c := &fakeCollector{}
	stop := start(t, Config{Path: path, Exporter: c})
	waitFor(t, "50 records", func() bool { return len(c.received()) >= 50 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	appendLines(t, path, 50, 80)
	stop = start(t, Config{Path: path, Exporter: c})
	waitFor(t, "80 records", func() bool { return len(c.received()) >= 80 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := c.received(); !equal(got, want(0, 80)) {
		t.Fatalf("got %v", got)
	}
}

func TestAnIncompleteLineWaitsForItsEnd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.jsonl")
	full := lineN(1)
	if err := os.WriteFile(path, []byte(lineN(0)+full[:40]), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &fakeCollector{}
	stop := start(t, Config{Path: path, Exporter: c})
	waitFor(t, "1 record", func() bool { return len(c.received()) >= 1 })
	time.Sleep(50 * time.Millisecond) // several intervals: the half line must not be shipped
	if got := c.received(); !equal(got, want(0, 1)) {
		t.Fatalf("half a line was shipped: %v", got)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(full[40:])
	f.Close()
	waitFor(t, "2 records", func() bool { return len(c.received()) >= 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := c.received(); !equal(got, want(0, 2)) {
		t.Fatalf("got %v", got)
	}
}

func TestRenameRotationDrainsTheOldFileFirst(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.jsonl")
	appendLines(t, path, 0, 10)
	c := &fakeCollector{}
	stop := start(t, Config{Path: path, Exporter: c})
	waitFor(t, "10 records", func() bool { return len(c.received()) >= 10 })

	// The writer keeps its descriptor across the rename, as Envoy does until it reopens.
	old, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 20; i++ {
		old.WriteString(lineN(i))
	}
	old.Close()
	appendLines(t, path, 20, 30) // reopened: a new file under the name
	waitFor(t, "30 records", func() bool { return len(c.received()) >= 30 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := c.received(); !equal(got, want(0, 30)) {
		t.Fatalf("got %v", got)
	}
	if _, err := os.Stat(path + ".old"); err != nil {
		t.Fatalf("a file rotated by someone else must be left alone: %v", err)
	}
}

func TestRestartFindsTheRotatedFileByInode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.jsonl")
	appendLines(t, path, 0, 10)
	c := &fakeCollector{}
	stop := start(t, Config{Path: path, Exporter: c})
	waitFor(t, "10 records", func() bool { return len(c.received()) >= 10 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// While the shipper is down: more lines, rotation, lines in the new file.
	appendLines(t, path, 10, 15)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendLines(t, path, 15, 25)
	stop = start(t, Config{Path: path, Exporter: c})
	waitFor(t, "25 records", func() bool { return len(c.received()) >= 25 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := c.received(); !equal(got, want(0, 25)) {
		t.Fatalf("got %v", got)
	}
}

func TestSelfRotationRemovesTheShippedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.jsonl")
	c := &fakeCollector{}
	// A writer that, like Envoy, appends through one descriptor and reopens the path on request.
	var mu sync.Mutex
	w, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	reopens := 0
	reopen := func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		w.Close()
		reopens++
		w, err = os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		return err
	}
	stop := start(t, Config{Path: path, Exporter: c, RotateBytes: 4096, Reopen: reopen})
	for i := 0; i < 300; i++ {
		mu.Lock()
		w.WriteString(lineN(i))
		mu.Unlock()
		if i%20 == 0 {
			time.Sleep(3 * time.Millisecond) // let rotations happen between writes
		}
	}
	waitFor(t, "300 records", func() bool { return len(c.received()) >= 300 })
	// Once everything is shipped, the last rotated file goes away too.
	waitFor(t, "the rotated file removed", func() bool {
		_, err := os.Stat(path + ".1")
		return errors.Is(err, os.ErrNotExist)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := c.received(); !equal(got, want(0, 300)) {
		t.Fatalf("got %d records, not 0..299 in order", len(got))
	}
	mu.Lock()
	defer mu.Unlock()
	if reopens == 0 {
		t.Fatal("never rotated")
	}
}

func TestMalformedLinesAreCountedAndSkipped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.jsonl")
	if err := os.WriteFile(path, []byte(lineN(0)+"not json\n\n"+lineN(1)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &fakeCollector{}
	s, err := New(Config{Path: path, Exporter: c, Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, "2 records", func() bool { return len(c.received()) >= 2 })
	cancel()
	<-done
	if got := c.received(); !equal(got, want(0, 2)) {
		t.Fatalf("got %v", got)
	}
	if p := s.Progress(); p.MalformedLines != 1 || p.RecordsShipped != 2 || p.PendingBytes != 0 {
		t.Fatalf("progress %+v", p)
	}
}

func TestParseTime(t *testing.T) {
	for in, want := range map[string]time.Time{
		`"1700000000.123456789"`: time.Unix(1700000000, 123456789),
		`"1700000000.5"`:         time.Unix(1700000000, 500000000),
		`1700000000`:             time.Unix(1700000000, 0),
		`"-"`:                    {},
	} {
		got, err := parseTime([]byte(in))
		if err != nil || !got.Equal(want) {
			t.Errorf("parseTime(%s) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseTime([]byte(`"yesterday"`)); err == nil {
		t.Error("parseTime accepted a word")
	}
}

// envoyLikeWriter appends through one descriptor and reopens the path on
// request, as Envoy does on POST /reopen_logs.
type envoyLikeWriter struct {
	mu      sync.Mutex
	path    string
	f       *os.File
	reopens int
}

func newEnvoyLikeWriter(t *testing.T, path string) *envoyLikeWriter {
	t.Helper()
	w := &envoyLikeWriter{path: path}
	if err := w.Reopen(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.f.Close() })
	return w
}

func (w *envoyLikeWriter) Reopen(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		w.f.Close()
		w.reopens++
	}
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	w.f = f
	return err
}

func (w *envoyLikeWriter) write(from, to int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := from; i < to; i++ {
		w.f.WriteString(lineN(i))
	}
}

// diskUse is the bytes of the access log and every file next to it named after it.
func diskUse(t *testing.T, path string) int64 {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range entries {
		if e.Name() == filepath.Base(path) || strings.HasPrefix(e.Name(), filepath.Base(path)+".") &&
			!strings.Contains(e.Name(), "checkpoint") {
			if fi, err := e.Info(); err == nil {
				total += fi.Size()
			}
		}
	}
	return total
}

func TestDiskCapDropsTheOldestRecordsAndCountsThemExactly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.jsonl")
	w := newEnvoyLikeWriter(t, path)
	c := &fakeCollector{down: true}
	const rotate, maxDisk, total, chunk = 4096, 16384, 1000, 10
	cfg := Config{Path: path, Exporter: c, RotateBytes: rotate, MaxDiskBytes: maxDisk, Reopen: w.Reopen}
	stop := start(t, cfg)
	// The Collector is down: the writer goes on, the cap holds.
	for i := 0; i < total; i += chunk {
		w.write(i, i+chunk)
		waitFor(t, fmt.Sprintf("disk use back under the %d-byte cap after record %d", maxDisk, i+chunk),
			func() bool { return diskUse(t, path) <= maxDisk })
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// A restart keeps the count (it is in the checkpoint); then the Collector is back.
	c.setDown(false)
	stop = start(t, cfg)
	defer stop()
	var dropped uint64
	waitFor(t, "every record shipped or dropped", func() bool {
		cp, err := loadCheckpoint(path + ".checkpoint")
		if err != nil || cp == nil {
			return false
		}
		dropped = cp.RecordsDropped
		return uint64(len(c.received()))+dropped == total
	})
	if dropped == 0 || dropped >= total {
		t.Fatalf("dropped %d of %d records: the cap should have dropped some and kept the newest", dropped, total)
	}
	// What arrives is the newest records, in order: the oldest went first.
	if got := c.received(); !equal(got, want(total-len(got), total)) {
		t.Fatalf("received %d records, not the newest in order: first %v", len(got), got[:min(5, len(got))])
	}
}

func TestDiskCapNeedsRotation(t *testing.T) {
	for _, cfg := range []Config{
		{Path: "x", Exporter: &fakeCollector{}, MaxDiskBytes: 1 << 20},
		{Path: "x", Exporter: &fakeCollector{}, MaxDiskBytes: 1 << 20, RotateBytes: 1 << 20},
	} {
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "-max-disk-bytes") {
			t.Errorf("%+v: want an error naming -max-disk-bytes, got %v", cfg, err)
		}
	}
}

func TestMetricsCarryTheDropCountsFromTheCheckpointsStart(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := Progress{RecordsDropped: 42, BytesDropped: 4200, DroppedSince: since, DiskBytes: 1000}
	md := p.Metrics("wirelens-logship", "/x/access.jsonl", since.Add(time.Minute))
	metrics := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	got := map[string]int64{}
	for i := 0; i < metrics.Len(); i++ {
		m := metrics.At(i)
		switch m.Name() {
		case MetricDroppedRecords, MetricDroppedBytes:
			dp := m.Sum().DataPoints().At(0)
			if !m.Sum().IsMonotonic() || dp.StartTimestamp().AsTime() != since {
				t.Errorf("%s: want a monotonic sum starting at %v, got start %v", m.Name(), since, dp.StartTimestamp().AsTime())
			}
			got[m.Name()] = dp.IntValue()
		case MetricDiskBytes:
			got[m.Name()] = m.Gauge().DataPoints().At(0).IntValue()
		}
	}
	if got[MetricDroppedRecords] != 42 || got[MetricDroppedBytes] != 4200 || got[MetricDiskBytes] != 1000 {
		t.Fatalf("got %v", got)
	}
}
