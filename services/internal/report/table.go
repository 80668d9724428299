package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// WriteTable prints a result as an aligned table: a header, a rule, one
// line per row; numeric columns are right-aligned.
func WriteTable(w io.Writer, res *Result, indent string) error {
	cols := len(res.Columns)
	widths := make([]int, cols)
	numeric := make([]bool, cols)
	cells := make([][]string, len(res.Rows))
	for i, c := range res.Columns {
		widths[i] = utf8.RuneCountInString(c.Name)
		numeric[i] = isNumeric(c.Type)
	}
	for r, row := range res.Rows {
		cells[r] = make([]string, cols)
		for i := 0; i < cols && i < len(row); i++ {
			text := strings.NewReplacer("\n", `\n`, "\t", `\t`, "\r", `\r`).Replace(CellText(row[i]))
			cells[r][i] = text
			widths[i] = max(widths[i], utf8.RuneCountInString(text))
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
		line(row)
	}
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("writing a table: %w", err)
	}
	return nil
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
