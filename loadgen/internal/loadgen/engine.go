package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Run performs the calls and returns the summary of the measured phase and
// the first call error (nil when every call succeeded and the run was not
// cut short by the timeout). Setup errors return a zero Summary.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	if TraceExports(cfg.Trace) && cfg.Tracer == nil {
		return Summary{}, fmt.Errorf("-trace %s needs a tracer to start the client spans", cfg.Trace)
	}
	w, err := newWorkload(cfg)
	if err != nil {
		return Summary{}, err
	}
	warmW := w
	if cfg.WarmupMessages > 0 && cfg.WarmupMessages != cfg.Messages {
		wc := cfg
		wc.Messages = cfg.WarmupMessages
		if warmW, err = newWorkload(wc); err != nil {
			return Summary{}, err
		}
	}
	c, err := newCaller(cfg, w, warmW)
	if err != nil {
		return Summary{}, err
	}
	defer c.close()

	ctx, cancel := context.WithTimeoutCause(ctx, cfg.Timeout, fmt.Errorf("-timeout %s reached", cfg.Timeout))
	defer cancel()

	e := &engine{cfg: cfg, c: c, rec: newRecorder(cfg), d: newDispenser(cfg)}
	if cfg.TraceIDs != nil {
		e.traces = bufio.NewWriter(cfg.TraceIDs)
	}
	go func() { // Stop and the timeout end the issuing of calls
		select {
		case <-cfg.Stop:
			e.d.interrupt()
		case <-ctx.Done():
			e.d.interrupt()
		case <-e.d.done:
		}
	}()
	var prog *progress
	if cfg.Progress != nil && cfg.ProgressInterval > 0 {
		prog = startProgress(e)
	}
	started := time.Now()
	switch cfg.Model {
	case ModelClosed:
		e.closed(ctx)
	case ModelOpen:
		e.open(ctx)
	default:
		e.workers(ctx)
	}
	ended := time.Now()
	e.d.finish()
	if prog != nil {
		prog.stop()
	}

	sum, firstErr := e.rec.summary(cfg, e.d)
	sum.Started, sum.Ended = rfc3339(started), rfc3339(ended)
	sum.Interrupted = e.d.interrupted.Load()
	if ctx.Err() != nil && firstErr == nil {
		firstErr = fmt.Errorf("stopped after %d calls: %w", sum.Calls, context.Cause(ctx))
	} else if cfg.N > 0 && sum.Calls < cfg.N && !sum.Interrupted && cfg.Duration == 0 && firstErr == nil {
		firstErr = fmt.Errorf("stopped after %d of %d calls", sum.Calls, cfg.N)
	}
	if e.traces != nil {
		if err := e.traces.Flush(); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("writing trace ids: %w", err)
		}
	}
	return sum, firstErr
}

func rfc3339(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

type engine struct {
	cfg     Config
	c       caller
	rec     *recorder
	d       *dispenser
	spawned atomic.Int64 // closed model: users started
	traces  *bufio.Writer
	tmu     sync.Mutex
}

// do performs one call of ticket t on behalf of worker (a user, or a
// worker of the concurrent model); intended is its due time in the open
// model (zero otherwise).
func (e *engine) do(ctx context.Context, worker int, t ticket, intended time.Time) {
	runID := e.cfg.RunID
	if t.warmup {
		runID = e.cfg.WarmupRunID()
	}
	traceparent, traceID, flags, span := e.traceContext(ctx, t, runID)
	t0 := time.Now()
	st, err := e.c.call(ctx, callInfo{i: t.index, worker: worker, traceparent: traceparent, runID: runID, stack: e.cfg.Stack, warmup: t.warmup})
	end := time.Now()
	if span != nil {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End(trace.WithTimestamp(end))
	}
	e.rec.record(t, st, err, t0, end, intended)
	if err == nil && !t.warmup && e.traces != nil && traceID != "" {
		e.tmu.Lock()
		fmt.Fprintf(e.traces, "%s\t%s\t%s\n", e.cfg.Protocol, traceID, flags)
		e.tmu.Unlock()
	}
}

// traceContext is the trace context call t carries (-trace): its
// traceparent ("" for none), trace id, flags, and its client span when
// one is exported.
func (e *engine) traceContext(ctx context.Context, t ticket, runID string) (traceparent, traceID, flags string, span trace.Span) {
	mode := e.cfg.Trace
	if mode == TraceMix {
		mode = TraceSampled
		if t.index%2 == 1 {
			mode = TraceUnsampled
		}
	}
	switch mode {
	case TraceOff:
		return "", "", "", nil
	case TraceUnsampled:
		tp, id := newTraceparentFlags("00")
		return tp, id, "00", nil
	case TraceSampled:
		// loadgen.* names: wirelens.* is the proxy's record, which the Collector and the queries key on.
		attrs := []attribute.KeyValue{
			attribute.String("loadgen.protocol", e.cfg.Protocol),
			attribute.String("loadgen.operation", e.cfg.Operation),
			attribute.Int64("loadgen.call", t.index),
			attribute.String("server.address", e.cfg.Target),
		}
		if runID != "" {
			attrs = append(attrs, attribute.String("loadgen.run_id", runID))
		}
		_, span = e.cfg.Tracer.Start(ctx, e.cfg.Operation+" ("+e.cfg.Protocol+")",
			trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		sc := span.SpanContext()
		// W3C form of the span's context (the SDK's sampler decides the flags: always sampled here).
		flags = "00"
		if sc.IsSampled() {
			flags = "01"
		}
		return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags, sc.TraceID().String(), flags, span
	default:
		tp, id := newTraceparent()
		return tp, id, "01", nil
	}
}

// workers: the sequential and concurrent models.
func (e *engine) workers(ctx context.Context) {
	n := e.cfg.Concurrency
	if e.cfg.N > 0 && e.cfg.Duration == 0 && e.cfg.WarmupDuration == 0 {
		n = min(n, e.cfg.N+e.cfg.WarmupCalls)
	}
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for {
				t, ok := e.d.next(time.Now())
				if !ok {
					return
				}
				e.do(ctx, w, t, time.Time{})
			}
		})
	}
	wg.Wait()
}

// closed: users started at the spawn rate, each looping call, think.
func (e *engine) closed(ctx context.Context) {
	start := time.Now()
	seed := uint64(start.UnixNano())
	var wg sync.WaitGroup
	for u := range e.cfg.Users {
		spawnAt := start
		if e.cfg.SpawnRate > 0 {
			spawnAt = start.Add(time.Duration(float64(u) / e.cfg.SpawnRate * float64(time.Second)))
		}
		wg.Go(func() {
			if !sleepUntil(spawnAt, e.d.done) {
				return
			}
			e.spawned.Add(1)
			rng := rand.New(rand.NewPCG(seed, uint64(u)))
			for {
				t, ok := e.d.next(time.Now())
				if !ok {
					return
				}
				e.do(ctx, u, t, time.Time{})
				think := e.cfg.ThinkMin
				if span := e.cfg.ThinkMax - e.cfg.ThinkMin; span > 0 {
					think += time.Duration(rng.Int64N(int64(span) + 1))
				}
				if think > 0 && !sleepUntil(time.Now().Add(think), e.d.done) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// open: arrivals at a constant rate, each call dispatched at its intended
// time; at most MaxInFlight calls run at once (a late dispatch still counts
// its latency from the intended time).
func (e *engine) open(ctx context.Context) {
	start := time.Now()
	sem := make(chan struct{}, e.cfg.MaxInFlight)
	var wg sync.WaitGroup
	for k := int64(0); ; k++ {
		intended := start.Add(time.Duration(float64(k) / e.cfg.Rate * float64(time.Second)))
		if !sleepUntil(intended, e.d.done) {
			break
		}
		t, ok := e.d.next(intended)
		if !ok {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			e.d.unissue(t)
			wg.Wait()
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			e.do(ctx, 0, t, intended)
		})
	}
	wg.Wait()
}

// sleepUntil waits until t; false if done closed first.
func sleepUntil(t time.Time, done <-chan struct{}) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-done:
		return false
	}
}

// ticket is the permission to start one call.
type ticket struct {
	warmup bool
	index  int64 // 0-based within its phase
}

// dispenser hands out tickets: first the warm-up phase, then the measured
// phase, each bounded by a count and a duration; done is closed when no
// more will be issued.
type dispenser struct {
	mu                   sync.Mutex
	warmN, n             int
	warmDur, dur         time.Duration
	inWarm               bool
	warmStart, measStart time.Time
	warmIssued, issued   int
	done                 chan struct{}
	once                 sync.Once
	interrupted          atomic.Bool
	timer                *time.Timer
	warmupPlanned        bool
}

func newDispenser(cfg Config) *dispenser {
	warm := cfg.WarmupCalls > 0 || cfg.WarmupDuration > 0
	dur := cfg.Duration
	if cfg.Model == ModelOpen {
		dur = 0 // the arrivals due within the duration are counted in N
	}
	return &dispenser{warmN: cfg.WarmupCalls, warmDur: cfg.WarmupDuration, n: cfg.N, dur: dur,
		inWarm: warm, warmupPlanned: warm, done: make(chan struct{})}
}

func (d *dispenser) next(now time.Time) (ticket, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.done:
		return ticket{}, false
	default:
	}
	if d.inWarm {
		if d.warmStart.IsZero() {
			d.warmStart = now
		}
		if (d.warmN > 0 && d.warmIssued >= d.warmN) || (d.warmDur > 0 && now.Sub(d.warmStart) >= d.warmDur) {
			d.inWarm = false
		} else {
			t := ticket{warmup: true, index: int64(d.warmIssued)}
			d.warmIssued++
			return t, true
		}
	}
	if d.measStart.IsZero() {
		d.measStart = now
		if d.dur > 0 {
			d.timer = time.AfterFunc(time.Until(now.Add(d.dur)), d.finish)
		}
	}
	if (d.n > 0 && d.issued >= d.n) || (d.dur > 0 && now.Sub(d.measStart) >= d.dur) {
		d.finishLocked()
		return ticket{}, false
	}
	t := ticket{index: int64(d.issued)}
	d.issued++
	return t, true
}

// unissue takes back a ticket that was never used.
func (d *dispenser) unissue(t ticket) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t.warmup {
		d.warmIssued--
	} else {
		d.issued--
	}
}

func (d *dispenser) finish() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.finishLocked()
}

func (d *dispenser) finishLocked() {
	d.once.Do(func() {
		close(d.done)
		if d.timer != nil {
			d.timer.Stop()
		}
	})
}

// interrupt ends the issuing early (Stop, timeout).
func (d *dispenser) interrupt() {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.done:
		return
	default:
	}
	d.interrupted.Store(true)
	d.finishLocked()
}

// state is a snapshot for the progress line.
func (d *dispenser) state() (inWarm bool, warmStart, measStart time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inWarm && d.warmupPlanned, d.warmStart, d.measStart
}

// recorder collects the outcome of every call.
type recorder struct {
	mu                      sync.Mutex
	lat, service            *histogram // measured, successful calls
	calls, failures         int
	sent, received          int64
	warmCalls, warmFailures int
	firstErr                error
	firstStart, lastEnd     time.Time
	open                    bool
}

func newRecorder(cfg Config) *recorder {
	r := &recorder{lat: newHistogram(), open: cfg.Model == ModelOpen}
	if r.open {
		r.service = newHistogram()
	}
	return r
}

func (r *recorder) record(t ticket, st callStats, err error, start, end, intended time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.warmup {
		r.warmCalls++
		if err != nil {
			r.warmFailures++
			if r.firstErr == nil {
				r.firstErr = fmt.Errorf("warm-up call %d: %w", t.index+1, err)
			}
		}
		return
	}
	from := start
	if !intended.IsZero() {
		from = intended
	}
	if r.firstStart.IsZero() || from.Before(r.firstStart) {
		r.firstStart = from
	}
	if end.After(r.lastEnd) {
		r.lastEnd = end
	}
	r.calls++
	r.sent += int64(st.sent)
	r.received += int64(st.received)
	if err != nil {
		r.failures++
		if r.firstErr == nil {
			r.firstErr = fmt.Errorf("call %d: %w", t.index+1, err)
		}
		return
	}
	r.lat.record(end.Sub(from))
	if r.service != nil {
		r.service.record(end.Sub(start))
	}
}

func (r *recorder) summary(cfg Config, d *dispenser) (Summary, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Summary{
		Protocol: cfg.Protocol, Operation: cfg.Operation, Model: cfg.Model, RunID: cfg.RunID, Stack: cfg.Stack,
		Calls: r.calls, OK: r.calls - r.failures, Errors: r.failures,
		P50Ms: r.lat.quantileMs(50), P90Ms: r.lat.quantileMs(90), P95Ms: r.lat.quantileMs(95),
		P99Ms: r.lat.quantileMs(99), MinMs: r.lat.minMs(), MaxMs: r.lat.maxMs(), MeanMs: r.lat.meanMs(),
		LatencyFrom:      "send",
		MessagesSent:     r.sent,
		MessagesReceived: r.received,
		WarmupCalls:      r.warmCalls,
		WarmupErrors:     r.warmFailures,
	}
	if d.warmupPlanned {
		s.WarmupRunID = cfg.WarmupRunID()
	}
	if r.open {
		s.LatencyFrom = "intended"
		p50, p99 := r.service.quantileMs(50), r.service.quantileMs(99)
		s.ServiceP50Ms, s.ServiceP99Ms = &p50, &p99
	}
	if r.calls > 0 {
		el := r.lastEnd.Sub(r.firstStart).Seconds()
		s.ElapsedS = math.Round(el*1e3) / 1e3
		if el > 0 {
			s.RatePerSec = math.Round(float64(r.calls)/el*10) / 10
		}
	}
	return s, r.firstErr
}

// snapshot for the progress line.
func (r *recorder) snapshot() (calls, failures, warmCalls int, p50, p99 float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, r.failures + r.warmFailures, r.warmCalls, r.lat.quantileMs(50), r.lat.quantileMs(99)
}
