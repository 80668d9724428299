package report

import (
	"encoding/json"
	"strings"
	"testing"
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
