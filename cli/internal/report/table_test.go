package report

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func sampleResult() *Result {
	return &Result{
		Columns: []Column{{"operation", "LowCardinality(String)"}, {"protocol", "String"}, {"calls", "UInt64"}, {"p50_ms", "Nullable(Float64)"}},
		Rows: [][]any{
			{"hello.SayHello", "grpc", json.Number("20"), json.Number("0.395")},
			{"catalog.GetProduct", "grpc-web-text", json.Number("1234"), nil},
		},
	}
}

func TestWriteTableAligns(t *testing.T) {
	var b strings.Builder
	if err := WriteTable(&b, sampleResult(), "  "); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"  operation           protocol       calls  p50_ms\n" +
		"  ------------------  -------------  -----  ------\n" +
		"  hello.SayHello      grpc              20   0.395\n" +
		"  catalog.GetProduct  grpc-web-text   1234    NULL\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWriteTableEscapesControlCharacters(t *testing.T) {
	res := &Result{Columns: []Column{{"a", "String"}, {"b", "String"}}, Rows: [][]any{{"x\ty", "line1\nline2"}}}
	var b strings.Builder
	if err := WriteTable(&b, res, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `x\ty  line1\nline2`) {
		t.Errorf("got %q", b.String())
	}
}

func TestWriteTSV(t *testing.T) {
	res := sampleResult()
	res.Rows = append(res.Rows, []any{"a\tb", `c\d`, json.Number("1"), json.Number("2")})
	var b strings.Builder
	if err := WriteTSV(&b, res); err != nil {
		t.Fatal(err)
	}
	want := "operation\tprotocol\tcalls\tp50_ms\n" +
		"hello.SayHello\tgrpc\t20\t0.395\n" +
		"catalog.GetProduct\tgrpc-web-text\t1234\t\\N\n" +
		"a\\tb\tc\\\\d\t1\t2\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
}

func TestFormatNumber(t *testing.T) {
	for _, c := range []struct {
		v       float64
		compact bool
		want    string
	}{
		{0, false, "0"}, {0.5, false, "0.5"}, {1.2345, false, "1.23"}, {12.34, false, "12.3"}, {1234.5, false, "1,235"},
		{1234567, false, "1,234,567"}, {25000, true, "25k"}, {1.5e6, true, "1.5M"}, {0.0001234, false, "0.000123"},
	} {
		if got := FormatNumber(c.v, c.compact); got != c.want {
			t.Errorf("FormatNumber(%v, %v) = %q, want %q", c.v, c.compact, got, c.want)
		}
	}
}

func TestCutCell(t *testing.T) {
	for _, c := range []struct {
		text  string
		width int
		want  string
	}{
		{"short", 8, "short"}, {"exactly8", 8, "exactly8"}, {"ninechars", 8, "ninecha…"},
		{"ééééééééé", 4, "ééé…"}, {"", 4, ""},
	} {
		if got := CutCell(c.text, c.width); got != c.want {
			t.Errorf("CutCell(%q, %d) = %q, want %q", c.text, c.width, got, c.want)
		}
	}
}

func TestWrapCell(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"fits", []string{"fits"}},
		{"one two three four", []string{"one two", "three", "four"}},
		{"abcdefghijklmnopq", []string{"abcdefgh", "ijklmnop", "q"}},
		{"a b c d e f g h i j k l m n o p q r s", []string{"a b c d", "e f g h", "i j k l…"}},
		{strings.Repeat("x", 100), []string{"xxxxxxxx", "xxxxxxxx", "xxxxxxx…"}},
	} {
		got := WrapCell(c.text, 8, 3)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("WrapCell(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

// No table grows with its input: an 8 KiB cell is cut in any column but the
// last, and wrapped onto a bounded number of lines in the last.
func TestWriteTableBoundsLongCells(t *testing.T) {
	long := "/" + strings.Repeat("k", 8191)
	verdict := "B is faster than A: median 0.61x [0.58, 0.64] of A's; p99 0.72x [0.65, 0.80] of A's; " +
		"the intervals exclude 1 at 95 % confidence, over 40,000 calls a side"
	res := &Result{
		Columns: []Column{{"operation", "String"}, {"calls", "UInt64"}, {"verdict", "String"}},
		Rows: [][]any{
			{long, json.Number("1"), verdict},
			{"hello.SayHello", json.Number("2"), long},
		},
	}
	var b strings.Builder
	if err := WriteTable(&b, res, "  "); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	bound := 2 + MaxCellWidth + 2 + len("calls") + 2 + LastColumnWidth
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > bound {
			t.Errorf("line of %d characters (bound %d): %q", n, bound, l)
		}
	}
	// header, rule, the verdict's row on 3 lines, the long path's on LastColumnLines
	if want := 2 + 3 + LastColumnLines; len(lines) != want {
		t.Errorf("%d lines, want %d:\n%s", len(lines), want, b.String())
	}
	if !strings.Contains(lines[2], "/"+strings.Repeat("k", MaxCellWidth-2)+Ellipsis) {
		t.Errorf("first column not cut with an ellipsis: %q", lines[2])
	}
	// The verdict reads whole: every word of it is in the table.
	for _, word := range strings.Fields(verdict) {
		if !strings.Contains(b.String(), word) {
			t.Errorf("verdict word %q lost:\n%s", word, b.String())
		}
	}
}
