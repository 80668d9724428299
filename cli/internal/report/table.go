package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Terminal tables stay readable whatever the data holds: no column grows
// with its input. A cell is cut to MaxCellWidth characters, its last one
// replaced by "…" (every name the report groups by is far shorter: operations
// come from the operation map, and a trace id is 32). The last column is the
// exception, because prose goes there (compare_protocols' verdict is ~165
// characters): it is word-wrapped at LastColumnWidth characters per line onto
// at most LastColumnLines lines, the last cut with "…" if the text goes on.
// So a line is at most the indent, the header widths or MaxCellWidth of each
// other column, two spaces between columns, and LastColumnWidth.
const (
	MaxCellWidth    = 48
	LastColumnWidth = 72
	LastColumnLines = 4
)

// Ellipsis ends a cell that was cut.
const Ellipsis = "…"

// WriteTable prints a result as an aligned table: a header, a rule, one
// line per row (more when its last cell is wrapped); numeric columns are
// right-aligned. Cells are cut or wrapped as the constants above say.
func WriteTable(w io.Writer, res *Result, indent string) error {
	cols := len(res.Columns)
	widths := make([]int, cols)
	numeric := make([]bool, cols)
	// cells[r][i] holds the lines of a cell: one, except in the last column.
	cells := make([][][]string, len(res.Rows))
	for i, c := range res.Columns {
		widths[i] = utf8.RuneCountInString(c.Name)
		numeric[i] = isNumeric(c.Type)
	}
	controls := strings.NewReplacer("\n", `\n`, "\t", `\t`, "\r", `\r`)
	for r, row := range res.Rows {
		cells[r] = make([][]string, cols)
		for i := 0; i < cols; i++ {
			text := ""
			if i < len(row) {
				text = controls.Replace(CellText(row[i]))
			}
			if i == cols-1 {
				cells[r][i] = WrapCell(text, LastColumnWidth, LastColumnLines)
			} else {
				cells[r][i] = []string{CutCell(text, MaxCellWidth)}
			}
			for _, l := range cells[r][i] {
				widths[i] = max(widths[i], utf8.RuneCountInString(l))
			}
		}
	}
	var b strings.Builder
	line := func(values []string) {
		b.WriteString(indent)
		for i, v := range values {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(v))
			if i > 0 {
				b.WriteString("  ")
			}
			if numeric[i] {
				b.WriteString(pad + v)
			} else if i < cols-1 {
				b.WriteString(v + pad)
			} else {
				b.WriteString(v)
			}
		}
		b.WriteString("\n")
	}
	header := make([]string, cols)
	rule := make([]string, cols)
	for i, c := range res.Columns {
		header[i] = c.Name
		rule[i] = strings.Repeat("-", widths[i])
	}
	line(header)
	line(rule)
	for _, row := range cells {
		values := make([]string, cols)
		for i := range row {
			values[i] = row[i][0]
		}
		line(values)
		if cols == 0 {
			continue
		}
		// Continuation lines of a wrapped last cell: the other columns blank.
		for _, more := range row[cols-1][1:] {
			clear(values)
			values[cols-1] = more
			line(values)
		}
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("writing a table: %w", err)
	}
	return nil
}

// CutCell returns text if it has at most width characters, else its first
// width-1 characters and Ellipsis.
func CutCell(text string, width int) string {
	if utf8.RuneCountInString(text) <= width {
		return text
	}
	runes := []rune(text)
	return string(runes[:max(width-1, 0)]) + Ellipsis
}

// WrapCell breaks text at spaces into lines of at most width characters (a
// word longer than a line is split), at most maxLines of them; if the text
// goes on, the last line is cut with Ellipsis. Empty text is one empty line.
func WrapCell(text string, width, maxLines int) []string {
	if utf8.RuneCountInString(text) <= width {
		return []string{text}
	}
	var lines []string
	line := []rune{}
	for _, word := range strings.Fields(text) {
		w := []rune(word)
		if len(line) > 0 && len(line)+1+len(w) <= width {
			line = append(append(line, ' '), w...)
			continue
		}
		if len(line) > 0 {
			lines = append(lines, string(line))
		}
		for len(w) > width {
			lines = append(lines, string(w[:width]))
			w = w[width:]
		}
		line = w
	}
	lines = append(lines, string(line))
	if len(lines) > maxLines {
		lines = lines[:maxLines]
		lines[maxLines-1] = CutCell(lines[maxLines-1]+" "+Ellipsis, width)
	}
	return lines
}

// WriteTSV prints a result as tab-separated values with a header line;
// tabs, newlines and backslashes in cells are escaped as ClickHouse does.
func WriteTSV(w io.Writer, res *Result) error {
	esc := strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`)
	var b strings.Builder
	for i, c := range res.Columns {
		if i > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(esc.Replace(c.Name))
	}
	b.WriteByte('\n')
	for _, row := range res.Rows {
		for i, v := range row {
			if i > 0 {
				b.WriteByte('\t')
			}
			if v == nil {
				b.WriteString(`\N`)
			} else {
				b.WriteString(esc.Replace(CellText(v)))
			}
		}
		b.WriteByte('\n')
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing TSV: %w", err)
	}
	return nil
}
