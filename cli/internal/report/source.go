package report

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Where the saved queries read from (Options.Source).
const (
	SourceAuto   = "auto"   // the rollups when the window holds more than RollupThreshold recorded calls
	SourceRaw    = "raw"    // queries/*.sql: every call, exact
	SourceRollup = "rollup" // queries/rollup/*.sql where a variant exists
)

// RollupThreshold is where auto switches to the rollups: above it the raw
// queries take over a second on a small machine (make bench-queries).
const RollupThreshold = 5_000_000

// chooseSource swaps saved queries for their rollup variants (same name, in
// QueriesDir/rollup) when the source asks for it, and says so in a note.
// When it does, it also checks the rollups for drift it cannot correct
// (rollupdrift.go) and returns what it found as warnings.
func chooseSource(ctx context.Context, ch *ClickHouse, opt Options, saved []SavedQuery,
	params map[string]string) ([]SavedQuery, string, []string, error) {
	out, note, rollups, err := chooseVariants(ctx, ch, opt, saved, params)
	if err != nil || !rollups {
		return out, note, nil, err
	}
	health, err := rollupDrift(ctx, ch, params)
	if err != nil {
		var unreachable *UnreachableError
		if errors.As(err, &unreachable) {
			return out, note, nil, err
		}
		return out, note, []string{"Could not check the rollups for drift: " + err.Error()}, nil
	}
	warnings, notes := health.warnings(opt.Source)
	if len(notes) > 0 {
		note += " " + strings.Join(notes, " ")
	}
	return out, note, warnings, nil
}

// chooseVariants does the swap; rollups is true when some query reads a rollup.
func chooseVariants(ctx context.Context, ch *ClickHouse, opt Options, saved []SavedQuery,
	params map[string]string) (out []SavedQuery, note string, rollups bool, err error) {
	if opt.Source == SourceRaw {
		return saved, "", false, nil
	}
	dir := filepath.Join(opt.QueriesDir, "rollup")
	variants, err := LoadSavedQueries(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && opt.Source == SourceAuto {
			return saved, "", false, nil
		}
		return saved, "", false, fmt.Errorf("--source %s: %w", opt.Source, err)
	}
	calls := int64(-1)
	if opt.Source == SourceAuto {
		q := mustBuiltin("rollup_calls")
		res, err := ch.Query(ctx, q.SQL, pick(params, q.Params))
		if err != nil {
			var unreachable *UnreachableError
			if errors.As(err, &unreachable) {
				return saved, "", false, err
			}
			return saved, "Read every call (the rollups did not answer: " + err.Error() + ").", false, nil
		}
		if len(res.Rows) > 0 {
			calls, _ = cellInt(res.Rows[0][0])
		}
		if calls <= RollupThreshold {
			return saved, "", false, nil
		}
	}
	byName := map[string]SavedQuery{}
	for _, v := range variants {
		byName[v.Name] = v
	}
	var swapped []string
	out = make([]SavedQuery, len(saved))
	for i, q := range saved {
		out[i] = q
		if v, ok := byName[q.Name]; ok {
			out[i] = v
			swapped = append(swapped, q.Name)
		}
	}
	if len(swapped) == 0 {
		return saved, fmt.Sprintf("No rollup variants in %s: every query read the raw calls.", dir), false, nil
	}
	why := "--source rollup"
	if calls >= 0 {
		why = fmt.Sprintf("%s recorded calls in the window (over %s)", groupThousands(fmt.Sprint(calls)), groupThousands(fmt.Sprint(RollupThreshold)))
	}
	return out, fmt.Sprintf("Read from the rollups (%s), %s: %s. Their percentiles are within 1 %% (DDSketch) "+
		"and their window is whole minutes (seconds for throughput); the other queries read every call. "+
		"--source raw for the exact raw-row queries (slower).", dir, why, strings.Join(swapped, ", ")), true, nil
}
