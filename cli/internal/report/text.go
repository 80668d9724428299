package report

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteText prints the report for a terminal: a header with the window, then
// one section per query with its table (format "table") or its TSV ("tsv").
func WriteText(w io.Writer, rep *Report, format string) error {
	var b strings.Builder
	tsv := format == "tsv"
	if tsv {
		fmt.Fprintf(&b, "# wirelens report\n# window: %s → %s (%s)\n", FormatTime(rep.Window.Since), FormatTime(rep.Window.Until), rep.Window.Source)
		if rep.Window.RunID != "" {
			fmt.Fprintf(&b, "# run: %s\n", rep.Window.RunID)
		}
	} else {
		fmt.Fprintf(&b, "wirelens report\n")
		fmt.Fprintf(&b, "  window      %s → %s (%s; %s)\n", FormatTime(rep.Window.Since), FormatTime(rep.Window.Until),
			FormatSpan(rep.Window.Until.Sub(rep.Window.Since)), rep.Window.Source)
		if rep.Window.RunID != "" {
			fmt.Fprintf(&b, "  run         %s\n", rep.Window.RunID)
		}
		fmt.Fprintf(&b, "  ClickHouse  %s\n  queries     %s\n", rep.ClickHouseURL, rep.QueriesDir)
	}
	if line := rep.Sampling.Line(); line != "" {
		if tsv {
			fmt.Fprintf(&b, "# sampling: %s\n", line)
		} else {
			fmt.Fprintf(&b, "  sampling    %s\n", wrap(line, 100, "              "))
		}
	}
	if line := rep.Drops.Line(); line != "" {
		if tsv {
			fmt.Fprintf(&b, "# dropped: %s\n", line)
		} else {
			fmt.Fprintf(&b, "  dropped     %s\n", wrap(line, 100, "              "))
		}
	}
	for _, n := range rep.Warnings {
		if tsv {
			fmt.Fprintf(&b, "# warning: %s\n", n)
		} else {
			fmt.Fprintf(&b, "  WARNING: %s\n", wrap(n, 100, "           "))
		}
	}
	for _, n := range rep.Notes {
		if tsv {
			fmt.Fprintf(&b, "# note: %s\n", n)
		} else {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
	}
	for _, sec := range rep.AllSections() {
		b.WriteString("\n")
		if err := writeSectionText(&b, sec, tsv); err != nil {
			return err
		}
		if sec == rep.Slowest && len(rep.SlowCalls) > 0 && !tsv {
			// The slowest call whose span exists: a row with span_sampled = false has no trace to open.
			var linked *SlowCall
			unlinked := 0
			for i := range rep.SlowCalls {
				if rep.SlowCalls[i].TraceURL == "" {
					unlinked++
				} else if linked == nil {
					linked = &rep.SlowCalls[i]
				}
			}
			if c := linked; c != nil {
				fmt.Fprintf(&b, "\n  Print a trace as a tree:  %s\n  In Jaeger's UI:  %s  (JSON: %s)\n", c.Command, c.TraceURL, c.APIURL)
				if len(rep.SlowCalls)-unlinked > 1 && strings.HasSuffix(c.TraceURL, c.TraceID) {
					fmt.Fprintf(&b, "  Any other row with span_sampled = true: its trace_id after %s\n", strings.TrimSuffix(c.TraceURL, c.TraceID))
				}
			}
			if unlinked > 0 {
				// Rows by reason, in the order the reasons first appear: "#3, #6: no span: ...; #12: no trace id".
				var reasons []string
				rowsOf := map[string][]string{}
				for i, c := range rep.SlowCalls {
					if c.TraceURL == "" {
						why := c.NoSpan
						if why == "" {
							why = "no trace id"
						}
						if rowsOf[why] == nil {
							reasons = append(reasons, why)
						}
						rowsOf[why] = append(rowsOf[why], fmt.Sprintf("#%d", i+1))
					}
				}
				parts := make([]string, len(reasons))
				for i, why := range reasons {
					parts[i] = strings.Join(rowsOf[why], ", ") + ": " + why
				}
				fmt.Fprintf(&b, "  Not linked (%d of %d): %s\n", unlinked, len(rep.SlowCalls), strings.Join(parts, "; "))
			}
		}
	}
	if n := rep.ErrorCount(); n > 0 && !tsv {
		fmt.Fprintf(&b, "\n%d quer%s failed: see ERROR above.\n", n, plural(n, "y", "ies"))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

func writeSectionText(b *strings.Builder, sec *Section, tsv bool) error {
	source := sec.Name + ".sql"
	if sec.Builtin {
		source = "built in: " + sec.Name
	}
	if tsv {
		fmt.Fprintf(b, "# %s\t%s\n", sec.Name, sec.Title)
	} else {
		fmt.Fprintf(b, "== %s [%s]\n", wrap(sec.Title, 100, "   "), source)
	}
	prefix := "  "
	if tsv {
		prefix = "# "
	}
	if sec.Combined != "" {
		fmt.Fprintf(b, "%s%s\n", prefix, sec.Combined)
	}
	if sec.Caveat != "" {
		fmt.Fprintf(b, "%s%s\n", prefix, sec.Caveat)
	}
	for _, e := range sec.Errors {
		fmt.Fprintf(b, "%sERROR: %s\n", prefix, strings.ReplaceAll(e, "\n", "\n"+prefix+"       "))
	}
	res := sec.Shown()
	if tsv {
		res = sec.ShownTSV()
	}
	if res != nil && (len(res.Rows) > 0 || len(sec.Errors) == 0) {
		var err error
		if tsv {
			err = WriteTSV(b, res)
		} else {
			err = WriteTable(b, res, "  ")
		}
		if err != nil {
			return err
		}
	}
	for _, n := range sec.Notes {
		fmt.Fprintf(b, "%snote: %s\n", prefix, n)
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// wrap breaks text into lines of at most width runes; continuation lines start with indent.
func wrap(text string, width int, indent string) string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		if line != "" && len([]rune(line))+1+len([]rune(word)) > width {
			lines = append(lines, line)
			line = word
			continue
		}
		if line == "" {
			line = word
		} else {
			line += " " + word
		}
	}
	lines = append(lines, line)
	return strings.Join(lines, "\n"+indent)
}

// FormatTime writes an instant in UTC with milliseconds.
func FormatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

// FormatSpan writes a window's length.
func FormatSpan(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.3f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%.1f min", d.Minutes())
	default:
		return fmt.Sprintf("%.1f h", d.Hours())
	}
}
