// Running one saved query into its section: parameters, the pairwise
// comparisons (one run per operation and protocol pair), errors.

package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

func describeParams(params map[string]string, names []string) []string {
	var out []string
	for _, n := range names {
		v := params[n]
		if n == "since" || n == "until" {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				v = FormatTime(time.UnixMilli(int64(math.Round(f * 1000))))
			}
		}
		out = append(out, fmt.Sprintf("%s=%s", n, strconv.Quote(v)))
	}
	return out
}

func pick(params map[string]string, names []string) map[string]string {
	out := make(map[string]string, len(names))
	for _, n := range names {
		out[n] = params[n]
	}
	return out
}

func queryFailed(sec *Section, err error) {
	var qe *QueryError
	if errors.As(err, &qe) {
		sec.Errors = append(sec.Errors, qe.Message)
		return
	}
	sec.Errors = append(sec.Errors, err.Error())
}

var commonParams = map[string]bool{"since": true, "until": true, "run_id": true}

// isResamples recognizes a parameter holding a bootstrap's number of resamples.
func isResamples(name string) bool {
	l := strings.ToLower(name)
	return strings.Contains(l, "resample") || strings.Contains(l, "bootstrap") || l == "iterations"
}

// resamplesOrDefault is the report's number of bootstrap resamples (0: 200).
func resamplesOrDefault(resamples int) int {
	if resamples <= 0 {
		return 200
	}
	return resamples
}

func runSaved(ctx context.Context, ch *ClickHouse, q SavedQuery, params map[string]string,
	medians map[string]map[string]float64, lat *Section, resamples int) *Section {
	sec := &Section{Name: q.Name, Title: q.Title(), Path: q.Path}
	var extra []string
	onlyResamples := true
	for _, p := range q.Params {
		if !commonParams[p] {
			extra = append(extra, p)
			onlyResamples = onlyResamples && isResamples(p)
		}
	}
	if len(extra) == 0 || onlyResamples {
		// Run once over the window; a number of resamples is the report's.
		p := pick(params, q.Params)
		for _, name := range extra {
			p[name] = strconv.Itoa(resamplesOrDefault(resamples))
		}
		sec.Params = describeParams(p, q.Params)
		res, err := ch.Query(ctx, q.SQL, p)
		if err != nil {
			queryFailed(sec, err)
			return sec
		}
		sec.Result = res
		if len(res.Rows) == 0 {
			sec.Notes = append(sec.Notes, "No rows in the window.")
		}
		if note := sampledNote(res); note != "" {
			sec.Notes = append(sec.Notes, note)
		}
		return sec
	}
	pair, ok := pairParams(extra)
	if !ok {
		sec.Skipped = true
		sec.Notes = append(sec.Notes, fmt.Sprintf("Skipped: it takes parameters the report cannot fill (%s).", strings.Join(extra, ", ")))
		return sec
	}
	runPairwise(ctx, ch, q, sec, params, pair, medians, lat, resamples)
	return sec
}

// pairing says which parameters of a pairwise query get what.
type pairing struct {
	operation, resamples string
	protocols            [2]string // the baseline (fastest median), the other
}

// pairParams recognizes a pairwise comparison: an operation, two protocols
// (the first named like a baseline: *_a, a, baseline, base*, reference,
// fastest, *1, left; else the first used in the text) and optionally a
// number of resamples.
func pairParams(extra []string) (pairing, bool) {
	var p pairing
	var protos []string
	for _, name := range extra {
		l := strings.ToLower(name)
		switch {
		case l == "operation" || l == "op":
			p.operation = name
		case isResamples(name):
			p.resamples = name
		case strings.Contains(l, "protocol") || strings.Contains(l, "proto") || l == "a" || l == "b" ||
			strings.Contains(l, "baseline") || strings.Contains(l, "candidate") || strings.Contains(l, "base") || strings.Contains(l, "other"):
			protos = append(protos, name)
		default:
			return p, false
		}
	}
	if p.operation == "" || len(protos) != 2 {
		return p, false
	}
	rank := func(name string) int {
		l := strings.ToLower(name)
		for _, s := range []string{"baseline", "base", "reference", "fastest", "left", "first"} {
			if strings.Contains(l, s) {
				return 0
			}
		}
		if l == "a" || strings.HasSuffix(l, "_a") || strings.HasSuffix(l, "1") {
			return 0
		}
		return 1
	}
	sort.SliceStable(protos, func(i, j int) bool { return rank(protos[i]) < rank(protos[j]) })
	p.protocols = [2]string{protos[0], protos[1]}
	return p, true
}

// UnknownOperation is the operation of every call the filter's operation map
// does not know (filters/README.md, "Bounded dimensions"): one row or chart
// like any operation, but its calls went to unrelated paths.
const UnknownOperation = "unknown"

func runPairwise(ctx context.Context, ch *ClickHouse, q SavedQuery, sec *Section, params map[string]string,
	pair pairing, medians map[string]map[string]float64, lat *Section, resamples int) {
	resamples = resamplesOrDefault(resamples)
	if lat == nil || len(lat.Errors) > 0 || medians == nil {
		sec.Skipped = true
		sec.Notes = append(sec.Notes, "Skipped: the pairs come from the latency medians, and that query failed.")
		return
	}
	sec.Combined = fmt.Sprintf("Run once per operation and pair: %s = the protocol with the fastest median, %s = each other protocol",
		pair.protocols[0], pair.protocols[1])
	if pair.resamples != "" {
		sec.Combined += fmt.Sprintf(", %s = %d", pair.resamples, resamples)
	}
	sec.Combined += "."
	runs := 0
	for _, op := range sortedKeys(medians) {
		meds := medians[op]
		if op == UnknownOperation {
			sec.Notes = append(sec.Notes, fmt.Sprintf("%s: calls to paths the operation map does not know, "+
				"not one operation: not compared.", op))
			continue
		}
		if len(meds) < 2 {
			sec.Notes = append(sec.Notes, fmt.Sprintf("%s: only %s in the window, nothing to compare.", op, strings.Join(sortedKeys(meds), ", ")))
			continue
		}
		protos := sortedKeys(meds)
		fastest := protos[0]
		for _, p := range protos[1:] {
			if meds[p] < meds[fastest] {
				fastest = p
			}
		}
		for _, other := range protos {
			if other == fastest {
				continue
			}
			p := pick(params, q.Params)
			p[pair.operation] = op
			p[pair.protocols[0]] = fastest
			p[pair.protocols[1]] = other
			if pair.resamples != "" {
				p[pair.resamples] = strconv.Itoa(resamples)
			}
			runs++
			res, err := ch.Query(ctx, q.SQL, p)
			if err != nil {
				var qe *QueryError
				msg := err.Error()
				if errors.As(err, &qe) {
					msg = qe.Message
				}
				sec.Errors = append(sec.Errors, fmt.Sprintf("%s, %s vs %s: %s", op, fastest, other, msg))
				continue
			}
			if sec.Result == nil {
				sec.Result = &Result{Columns: res.Columns, Timezone: res.Timezone}
			}
			if sameColumns(sec.Result.Columns, res.Columns) {
				sec.Result.Rows = append(sec.Result.Rows, res.Rows...)
			} else {
				sec.Errors = append(sec.Errors, fmt.Sprintf("%s, %s vs %s: answered other columns than the first run", op, fastest, other))
			}
		}
	}
	if runs == 0 {
		sec.Skipped = true
		sec.Notes = append(sec.Notes, "Skipped: no operation has two protocols in the window.")
	} else if sec.Result != nil && len(sec.Result.Rows) == 0 {
		sec.Notes = append(sec.Notes, "No rows.")
	}
	if note := sampledNote(sec.Result); note != "" {
		sec.Notes = append(sec.Notes, note)
	}
}

func sameColumns(a, b []Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name {
			return false
		}
	}
	return true
}
