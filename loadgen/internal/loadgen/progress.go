package loadgen

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// progress writes a status line every ProgressInterval: phase, calls,
// current rate, p50/p99 so far, errors, ETA. On a terminal the line is
// redrawn in place; otherwise one plain line per interval.
type progress struct {
	e    *engine
	quit chan struct{}
	wg   sync.WaitGroup

	lastCalls int
	lastAt    time.Time
}

func startProgress(e *engine) *progress {
	p := &progress{e: e, quit: make(chan struct{}), lastAt: time.Now()}
	p.wg.Go(func() {
		tick := time.NewTicker(e.cfg.ProgressInterval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				p.print(false)
			case <-p.quit:
				return
			}
		}
	})
	return p
}

func (p *progress) stop() {
	close(p.quit)
	p.wg.Wait()
	p.print(true)
}

func (p *progress) print(final bool) {
	cfg := p.e.cfg
	calls, errs, warm, p50, p99 := p.e.rec.snapshot()
	inWarm, warmStart, measStart := p.e.d.state()
	now := time.Now()

	done := calls
	if inWarm {
		done = warm
	}
	rate := 0.0
	if dt := now.Sub(p.lastAt).Seconds(); dt > 0 {
		rate = float64(calls+warm-p.lastCalls) / dt
	}
	if final && !measStart.IsZero() {
		if el := now.Sub(measStart).Seconds(); el > 0 {
			rate = float64(calls) / el // the run's average
		}
	}
	p.lastCalls, p.lastAt = calls+warm, now

	var b strings.Builder
	fmt.Fprintf(&b, "loadgen %s %s", cfg.Protocol, cfg.Operation)
	switch {
	case inWarm:
		fmt.Fprintf(&b, " | warm-up %d", done)
		if cfg.WarmupCalls > 0 {
			fmt.Fprintf(&b, "/%d", cfg.WarmupCalls)
		}
		if cfg.WarmupDuration > 0 && !warmStart.IsZero() {
			fmt.Fprintf(&b, " (%s/%s)", now.Sub(warmStart).Round(time.Second), cfg.WarmupDuration)
		}
	case final:
		fmt.Fprintf(&b, " | done %d", done)
	default:
		fmt.Fprintf(&b, " | %d", done)
		if cfg.N > 0 {
			fmt.Fprintf(&b, "/%d", cfg.N)
		}
	}
	fmt.Fprintf(&b, " calls | %.0f/s", rate)
	if cfg.Model == ModelClosed {
		fmt.Fprintf(&b, " | users %d/%d", p.e.spawned.Load(), cfg.Users)
	}
	fmt.Fprintf(&b, " | p50 %.2f ms p99 %.2f ms | errors %d", p50, p99, errs)
	if !final && !inWarm && !measStart.IsZero() {
		if eta, ok := p.eta(now, measStart, calls, rate); ok {
			fmt.Fprintf(&b, " | ETA %s", eta)
		}
	}

	w := cfg.Progress
	switch {
	case cfg.ProgressTTY && final:
		fmt.Fprintf(w, "\r\x1b[K%s\n", b.String())
	case cfg.ProgressTTY:
		fmt.Fprintf(w, "\r\x1b[K%s", b.String())
	default:
		fmt.Fprintln(w, b.String())
	}
}

// eta is the time left: the earlier of the count bound (at the current
// rate) and the duration bound.
func (p *progress) eta(now, measStart time.Time, calls int, rate float64) (time.Duration, bool) {
	cfg := p.e.cfg
	var eta time.Duration
	ok := false
	if cfg.N > 0 && rate > 0 {
		eta, ok = time.Duration(float64(cfg.N-calls)/rate*float64(time.Second)), true
	}
	if cfg.Duration > 0 {
		left := max(0, measStart.Add(cfg.Duration).Sub(now))
		if !ok || left < eta {
			eta, ok = left, true
		}
	}
	return eta.Round(time.Second), ok
}
