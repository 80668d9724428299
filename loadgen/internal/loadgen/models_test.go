package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelens/wirelens/internal/chclient"
)

// runIDs counts the calls the fake Envoy saw per run id.
func (f *fakeEnvoy) runIDs() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, s := range f.calls {
		out[s.runID]++
	}
	return out
}

func TestSequentialWarmupHasItsOwnRunID(t *testing.T) {
	for _, proto := range []string{ProtocolREST, ProtocolGRPC} {
		f, target := startFakeEnvoy(t, "")
		sum, err := Run(context.Background(), Config{Target: target, Protocol: proto, Operation: "hello.SayHello",
			Model: ModelSequential, N: 30, WarmupCalls: 5, RunID: "r1", Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Calls != 30 || sum.WarmupCalls != 5 || sum.WarmupRunID != "r1-warmup" || sum.Model != ModelSequential {
			t.Fatalf("summary %+v", sum)
		}
		if got := f.runIDs(); got["r1"] != 30 || got["r1-warmup"] != 5 || len(got) != 2 {
			t.Fatalf("%s: run ids seen %v", proto, got)
		}
	}
}

func TestWarmupStreamsUseWarmupMessages(t *testing.T) {
	_, target := startFakeEnvoy(t, "")
	sum, err := Run(context.Background(), Config{Target: target, Protocol: ProtocolGRPC, Operation: "people.RegisterBatch",
		N: 1, Concurrency: 1, Messages: 500, WarmupCalls: 3, WarmupMessages: 1, RunID: "s", Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sum.MessagesSent != 500 || sum.WarmupCalls != 3 {
		t.Fatalf("summary %+v", sum)
	}
}

func TestClosedModelThinksAndEndsOnDuration(t *testing.T) {
	f, target := startFakeEnvoy(t, "")
	for _, proto := range []string{ProtocolREST, ProtocolGRPC} {
		start := time.Now()
		sum, err := Run(context.Background(), Config{Target: target, Protocol: proto, Operation: "hello.SayHello",
			Model: ModelClosed, Users: 4, SpawnRate: 40, ThinkMin: 40 * time.Millisecond, ThinkMax: 60 * time.Millisecond,
			Duration: 600 * time.Millisecond, RunID: "closed-" + proto, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		// 4 users, ~50 ms think: about 4 * 600/50 = 48 calls; far fewer than without think time.
		if sum.Calls < 15 || sum.Calls > 70 || el > 3*time.Second {
			t.Fatalf("%s: %d calls in %s: %+v", proto, sum.Calls, el, sum)
		}
		if got := f.runIDs()["closed-"+proto]; got != sum.Calls {
			t.Fatalf("%s: server saw %d calls, summary %d", proto, got, sum.Calls)
		}
	}
}

func TestClosedModelCountBound(t *testing.T) {
	_, target := startFakeEnvoy(t, "")
	sum, err := Run(context.Background(), Config{Target: target, Protocol: ProtocolGRPCWeb, Operation: "catalog.GetProduct",
		Model: ModelClosed, Users: 5, N: 37, Timeout: 20 * time.Second})
	if err != nil || sum.Calls != 37 {
		t.Fatalf("summary %+v err %v", sum, err)
	}
}

func TestOpenModelRateAndIntendedTime(t *testing.T) {
	var mu sync.Mutex
	seen := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen++
		mu.Unlock()
		time.Sleep(30 * time.Millisecond) // slower than the 10 ms between arrivals
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"message":"Hello, wirelens"}`)
	}))
	defer ts.Close()
	sum, err := Run(context.Background(), Config{Target: ts.URL, Protocol: ProtocolREST, Operation: "hello.SayHello",
		Name: "wirelens", Model: ModelOpen, Rate: 100, Duration: 500 * time.Millisecond, MaxInFlight: 2, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Calls != 50 || seen != 50 || sum.LatencyFrom != "intended" {
		t.Fatalf("summary %+v (server saw %d)", sum, seen)
	}
	// Two in flight, 30 ms each: 66 calls/s served for 100/s arriving, so
	// the last calls waited long past their intended time: the latency
	// from the intended time must show that queueing, the service time not.
	if sum.P99Ms < 150 || sum.ServiceP99Ms == nil || *sum.ServiceP99Ms > sum.P99Ms/2 {
		t.Fatalf("queueing hidden: p99 %.1f ms, service p99 %v", sum.P99Ms, *sum.ServiceP99Ms)
	}
}

func TestStopEndsTheRunGracefully(t *testing.T) {
	_, target := startFakeEnvoy(t, "")
	stop := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { close(stop) })
	var prog bytes.Buffer
	sum, err := Run(context.Background(), Config{Target: target, Protocol: ProtocolREST, Operation: "hello.SayHello",
		N: 10_000_000, Concurrency: 1, Timeout: 20 * time.Second, Stop: stop,
		Progress: &syncWriter{w: &prog}, ProgressInterval: 100 * time.Millisecond})
	if err != nil || !sum.Interrupted || sum.Calls == 0 || sum.Errors != 0 {
		t.Fatalf("summary %+v err %v", sum, err)
	}
	lines := strings.Split(strings.TrimSpace(prog.String()), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "/10000000 calls") || !strings.Contains(lines[0], "ETA") ||
		!strings.Contains(lines[len(lines)-1], "done ") || !strings.Contains(lines[0], "p99") {
		t.Fatalf("progress:\n%s", prog.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestValidateModels(t *testing.T) {
	base := Config{Target: "127.0.0.1:1", Protocol: ProtocolREST, Operation: "hello.SayHello", Timeout: time.Second}
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Model = "poisson" }, "-model must be one of"},
		{func(c *Config) { c.Model = ModelClosed; c.Duration = time.Second }, "-users must be at least 1"},
		{func(c *Config) { c.Model = ModelClosed; c.Users = 1 }, "needs -duration or -n"},
		{func(c *Config) { c.Model = ModelClosed; c.Users = 1; c.N = 1; c.ThinkMin = 2; c.ThinkMax = 1 }, "-think"},
		{func(c *Config) { c.Model = ModelOpen; c.Duration = time.Second }, "-rate must be positive"},
		{func(c *Config) { c.Model = ModelSequential; c.N = 0 }, "-n must be at least 1"},
	} {
		cfg := base
		tc.mod(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", cfg, err, tc.want)
		}
	}
	cfg := base
	cfg.Model, cfg.Rate, cfg.Duration = ModelOpen, 200, 3*time.Second
	if err := cfg.Validate(); err != nil || cfg.N != 600 {
		t.Fatalf("open model N = %d, err %v", cfg.N, err)
	}
}

func TestParsers(t *testing.T) {
	if lo, hi, err := ParseThink("1s-2s"); err != nil || lo != time.Second || hi != 2*time.Second {
		t.Fatal(lo, hi, err)
	}
	if lo, hi, err := ParseThink("250ms"); err != nil || lo != hi || lo != 250*time.Millisecond {
		t.Fatal(lo, hi, err)
	}
	if _, _, err := ParseThink("2s-1s"); err == nil {
		t.Fatal("2s-1s accepted")
	}
	for in, want := range map[string]float64{"200/s": 200, "120/m": 2, "10": 10, "3600/h": 1} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %g, %v", in, got, err)
		}
	}
	if _, err := ParseRate("10/d"); err == nil {
		t.Error("10/d accepted")
	}
	if n, d, err := ParseWarmup("50"); err != nil || n != 50 || d != 0 {
		t.Fatal(n, d, err)
	}
	if n, d, err := ParseWarmup("10s"); err != nil || n != 0 || d != 10*time.Second {
		t.Fatal(n, d, err)
	}
	if _, _, err := ParseWarmup("ten"); err == nil {
		t.Fatal("ten accepted")
	}
}

func TestHistogram(t *testing.T) {
	h := newHistogram()
	for i := 1; i <= 100; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	if p := h.quantileMs(50); p < 49.9 || p > 50.1 {
		t.Fatalf("p50 = %g", p)
	}
	if p := h.quantileMs(99); p < 98.9 || p > 99.1 {
		t.Fatalf("p99 = %g", p)
	}
	if h.minMs() != 1 || h.maxMs() != 100 || h.meanMs() != 50.5 {
		t.Fatalf("min %g max %g mean %g", h.minMs(), h.maxMs(), h.meanMs())
	}
	if e := newHistogram(); e.quantileMs(50) != 0 || e.meanMs() != 0 {
		t.Fatal("empty histogram")
	}
}

// fakeClickHouse answers the proxy query with a row count that reaches the
// expected one after a few polls, and keeps the rows inserted into wirelens.runs.
type fakeClickHouse struct {
	mu      sync.Mutex
	polls   int
	rows    int
	inserts []map[string]any
}

func (f *fakeClickHouse) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	s := string(body)
	switch {
	case strings.HasPrefix(s, "INSERT INTO wirelens.runs FORMAT JSONEachRow\n"):
		for _, line := range strings.Split(strings.TrimSpace(strings.SplitN(s, "\n", 2)[1]), "\n") {
			var row map[string]any
			if err := json.Unmarshal([]byte(line), &row); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			f.inserts = append(f.inserts, row)
		}
	case strings.Contains(s, "FROM wirelens.requests FINAL") && r.URL.Query().Get("param_run") == "cmp":
		f.polls++
		n := min(f.rows, f.polls*4)
		_, _ = io.WriteString(w, strings.Join([]string{itoa(n), "800", "1500", "3000", "9000", "1000.4"}, "\t")+"\n")
	default:
		http.Error(w, "Code: 62. Syntax error", 400)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestRegisterAndCompare(t *testing.T) {
	fch := &fakeClickHouse{rows: 10}
	ts := httptest.NewServer(fch)
	defer ts.Close()
	ch, err := chclient.New(ts.URL, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Target: "127.0.0.1:1", Protocol: ProtocolGRPC, Operation: "hello.SayHello", N: 10, Concurrency: 1, RunID: "cmp", Timeout: time.Second}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	started := time.Now()
	if err := RegisterStart(ctx, ch, cfg, "e2", started); err != nil {
		t.Fatal(err)
	}
	sum := Summary{RunID: "cmp", Calls: 10, P50Ms: 1.2, P90Ms: 2, P99Ms: 4, MaxMs: 10, LatencyFrom: "send"}
	if err := RegisterEnd(ctx, ch, cfg, "e2", started, started, sum); err != nil {
		t.Fatal(err)
	}
	if len(fch.inserts) != 2 || fch.inserts[0]["ended"] != nil || fch.inserts[1]["ended"] == nil ||
		fch.inserts[0]["scenario"] != "e2" || !(fch.inserts[1]["updated"].(string) > fch.inserts[0]["updated"].(string)) {
		t.Fatalf("inserts %v", fch.inserts)
	}
	p, err := WaitForProxy(ctx, ch, "cmp", 10, 10*time.Second)
	if err != nil || !p.CallsMatch || p.Calls != 10 || p.P50Ms != 0.8 || p.P99Ms != 3 || fch.polls != 3 {
		t.Fatalf("proxy %+v err %v polls %d", p, err, fch.polls)
	}
	out := FormatComparison(sum, p)
	for _, want := range []string{"client", "proxy", "+0.400", "calls match: 10 sent, 10 recorded"} {
		if !strings.Contains(out, want) {
			t.Fatalf("comparison lacks %q:\n%s", want, out)
		}
	}
	fch.rows, fch.polls = 7, 0
	p, _ = WaitForProxy(ctx, ch, "cmp", 10, 700*time.Millisecond)
	if p.CallsMatch || p.Calls != 7 || !strings.Contains(FormatComparison(sum, p), "CALLS DO NOT MATCH") {
		t.Fatalf("mismatch not reported: %+v", p)
	}
	if _, err := WaitForProxy(ctx, ch, "other", 1, 5*time.Second); err == nil || !chclient.IsRefused(err) {
		t.Fatalf("refused query: %v", err)
	}
}

func TestBidiLockstep(t *testing.T) {
	_, target := startFakeEnvoy(t, "")
	sum, err := Run(context.Background(), Config{Target: target, Protocol: ProtocolGRPC, Operation: "echo.BiStream",
		Messages: 500, Lockstep: true, N: 2, Concurrency: 1, Timeout: 20 * time.Second})
	if err != nil || sum.OK != 2 || sum.MessagesSent != 1000 || sum.MessagesReceived != 1000 {
		t.Fatalf("summary %+v err %v", sum, err)
	}
}
