package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wirelens/wirelens/internal/chclient"
)

// runRow is one version of a run in wirelens.runs (ReplacingMergeTree on
// `updated`: the newest version wins).
type runRow struct {
	RunID         string  `json:"run_id"`
	Scenario      string  `json:"scenario"`
	Parameters    string  `json:"parameters"`
	Started       string  `json:"started"`
	Ended         *string `json:"ended"`
	ClientSummary string  `json:"client_summary"`
	Updated       string  `json:"updated"`
}

// RegisterStart records the run in wirelens.runs as started (no end, no
// summary yet).
func RegisterStart(ctx context.Context, ch *chclient.Client, cfg Config, scenario string, started time.Time) error {
	params, err := json.Marshal(cfg.Parameters())
	if err != nil {
		return err
	}
	return ch.InsertJSON(ctx, "wirelens.runs", runRow{
		RunID: cfg.RunID, Scenario: scenario, Parameters: string(params),
		Started: rfc3339(started), ClientSummary: "{}", Updated: rfc3339(started),
	})
}

// RegisterEnd records the run's end and the client's summary, as a newer
// version of the row RegisterStart wrote.
func RegisterEnd(ctx context.Context, ch *chclient.Client, cfg Config, scenario string, started, ended time.Time, sum Summary) error {
	params, err := json.Marshal(cfg.Parameters())
	if err != nil {
		return err
	}
	summary, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	end := rfc3339(ended)
	// Strictly newer than the start row, whatever the clocks did.
	updated := rfc3339(maxTime(ended, started.Add(time.Millisecond)))
	return ch.InsertJSON(ctx, "wirelens.runs", runRow{
		RunID: cfg.RunID, Scenario: scenario, Parameters: string(params),
		Started: rfc3339(started), Ended: &end, ClientSummary: string(summary), Updated: updated,
	})
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ProxySummary is what the proxy (the wirelens filter in Envoy) recorded
// for one run: rows of wirelens.requests and their duration_us.
type ProxySummary struct {
	Calls  int     `json:"calls"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	MeanMs float64 `json:"mean_ms"`
	// CallsMatch: exactly as many rows as the client completed calls.
	CallsMatch bool `json:"calls_match"`
	// WaitedS is how long the rows took to arrive after the run.
	WaitedS float64 `json:"waited_s"`
}

const proxyQuery = `SELECT
    count(),
    quantileExact(0.50)(duration_us),
    quantileExact(0.90)(duration_us),
    quantileExact(0.99)(duration_us),
    max(duration_us),
    ifNotFinite(avg(duration_us), 0)
FROM wirelens.requests FINAL
WHERE run_id = {run:String}
FORMAT TabSeparated`

// QueryProxy reads the proxy's view of a run once.
func QueryProxy(ctx context.Context, ch *chclient.Client, runID string) (ProxySummary, error) {
	out, err := ch.Query(ctx, proxyQuery, map[string]string{"run": runID})
	if err != nil {
		return ProxySummary{}, err
	}
	f := strings.Fields(strings.TrimSpace(string(out)))
	if len(f) != 6 {
		return ProxySummary{}, fmt.Errorf("unexpected answer from ClickHouse: %q", out)
	}
	var v [6]float64
	for k, s := range f {
		if v[k], err = strconv.ParseFloat(s, 64); err != nil {
			return ProxySummary{}, fmt.Errorf("unexpected answer from ClickHouse: %q", out)
		}
	}
	us := func(x float64) float64 { return math.Round(x) / 1e3 }
	return ProxySummary{Calls: int(v[0]), P50Ms: us(v[1]), P90Ms: us(v[2]), P99Ms: us(v[3]), MaxMs: us(v[4]), MeanMs: us(v[5])}, nil
}

// WaitForProxy polls ClickHouse until the proxy has exactly calls rows for
// the run, or the deadline passes (then it returns what it saw last, with
// CallsMatch false).
func WaitForProxy(ctx context.Context, ch *chclient.Client, runID string, calls int, deadline time.Duration) (ProxySummary, error) {
	start := time.Now()
	end := start.Add(deadline)
	for {
		p, err := QueryProxy(ctx, ch, runID)
		if err != nil && chclient.IsRefused(err) {
			return p, err // a broken query does not heal by waiting
		}
		if err == nil && p.Calls == calls {
			p.CallsMatch = true
			p.WaitedS = math.Round(time.Since(start).Seconds()*10) / 10
			return p, nil
		}
		if time.Now().After(end) || ctx.Err() != nil {
			p.WaitedS = math.Round(time.Since(start).Seconds()*10) / 10
			return p, err
		}
		select {
		case <-time.After(250 * time.Millisecond): // polling interval while waiting on a deadline
		case <-ctx.Done():
		}
	}
}

// FormatComparison is the client and the proxy side by side, and the gap.
func FormatComparison(sum Summary, p ProxySummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "client vs proxy, run %s (client: %s latency of the successful calls; proxy: wirelens.requests duration_us, every row)\n",
		sum.RunID, map[string]string{"send": "send-to-answer", "intended": "intended-send-to-answer"}[sum.LatencyFrom])
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tcalls\tp50 ms\tp90 ms\tp99 ms\tmax ms\t")
	fmt.Fprintf(tw, "client\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t\n", sum.Calls, sum.P50Ms, sum.P90Ms, sum.P99Ms, sum.MaxMs)
	fmt.Fprintf(tw, "proxy\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t\n", p.Calls, p.P50Ms, p.P90Ms, p.P99Ms, p.MaxMs)
	fmt.Fprintf(tw, "gap (client - proxy)\t%+d\t%+.3f\t%+.3f\t%+.3f\t%+.3f\t\n", sum.Calls-p.Calls,
		sum.P50Ms-p.P50Ms, sum.P90Ms-p.P90Ms, sum.P99Ms-p.P99Ms, sum.MaxMs-p.MaxMs)
	tw.Flush()
	if p.CallsMatch {
		fmt.Fprintf(&b, "calls match: %d sent, %d recorded by the proxy (rows arrived within %.1fs)\n", sum.Calls, p.Calls, p.WaitedS)
	} else {
		fmt.Fprintf(&b, "CALLS DO NOT MATCH: %d sent, %d recorded by the proxy after waiting %.1fs\n", sum.Calls, p.Calls, p.WaitedS)
	}
	return b.String()
}
