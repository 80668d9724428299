package report

import (
	"encoding/xml"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

// wellFormed parses the SVG as XML and counts elements by name.
func wellFormed(t *testing.T, svgText string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	dec := xml.NewDecoder(strings.NewReader(svgText))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, svgText)
		}
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
		}
	}
	if counts["svg"] != 1 {
		t.Fatalf("want one <svg> root, got %d", counts["svg"])
	}
	return counts
}

var seriesPath = regexp.MustCompile(`<path class="series" data-series="([^"]+)" d="M[^"]+L[^"]+"`)

func seriesNames(svgText string) []string {
	var names []string
	for _, m := range seriesPath.FindAllStringSubmatch(svgText, -1) {
		names = append(names, m[1])
	}
	return names
}

func TestCDFChart(t *testing.T) {
	levels := cdfLevels()
	mk := func(name string, base float64) CDFSeries {
		s := CDFSeries{Name: name, Calls: 100, Levels: levels, Median: base * 1.5}
		for i := range levels {
			s.Values = append(s.Values, base*(1+float64(i)/10))
		}
		return s
	}
	out := CDFChart("hello.SayHello <&>", []CDFSeries{mk("grpc", 0.3), mk("rest", 0.6)})
	counts := wellFormed(t, out)
	if got := seriesNames(out); strings.Join(got, ",") != "grpc,rest" {
		t.Errorf("series %v", got)
	}
	// A log axis from 0.1 ms to 10 ms: decade ticks, both axes, the escaped title.
	for _, want := range []string{`class="axis x-axis"`, `class="axis y-axis"`, ">100 µs<", ">1 ms<", ">10 ms<", ">50%<", ">100%<",
		"log scale", "hello.SayHello &lt;&amp;&gt;", "grpc (100 calls, p50 450 µs)", ProtocolColor("grpc"), ProtocolColor("rest")} {
		if !strings.Contains(out, want) {
			t.Errorf("CDF chart lacks %q", want)
		}
	}
	if counts["path"] != 2 || counts["title"] < 3 {
		t.Errorf("elements %v", counts)
	}
	// Log scale: 1 ms sits half way between 0.1 ms and 10 ms.
	x := func(label string) string {
		m := regexp.MustCompile(`x="([0-9.]+)" y="[0-9.]+" text-anchor="middle" fill="#333">` + label + `<`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no tick %s", label)
		}
		return m[1]
	}
	if x("100 µs") != "58" || x("10 ms") != "500" || x("1 ms") != "279" {
		t.Errorf("tick positions 100µs=%s 1ms=%s 10ms=%s", x("100 µs"), x("1 ms"), x("10 ms"))
	}
}

func TestBarPanels(t *testing.T) {
	legend := []legendItem{{label: "request headers", color: "#111"}, {label: "response body", color: "#222"}}
	panels := []Panel{
		{Title: "hello.SayHello", Bars: []Bar{
			{Label: "grpc", Color: ProtocolColor("grpc"), Segments: []Segment{{"request headers", 334, "#111"}, {"response body", 22, "#222"}}},
			{Label: "rest", Color: ProtocolColor("rest"), Segments: []Segment{{"request headers", 286, "#111"}, {"response body", 0, "#222"}}},
		}},
		{Title: "catalog.ListProducts", Bars: []Bar{
			{Label: "grpc", Segments: []Segment{{"request headers", 300, "#111"}, {"response body", 48912, "#222"}}},
		}},
	}
	out := BarPanels("Bytes", legend, panels, "B", "bytes")
	counts := wellFormed(t, out)
	// Zero-width segments are left out: 2 + 1 + 2 bars.
	if n := strings.Count(out, `<rect class="bar"`); n != 5 {
		t.Errorf("%d bars, want 5", n)
	}
	for _, want := range []string{`data-panel="hello.SayHello"`, `data-panel="catalog.ListProducts"`, ">356 B<", ">49,212 B<",
		">50k<", ">400<", "request headers", `class="axis x-axis"`, "grpc · response body: 22 B"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar chart lacks %q", want)
		}
	}
	if counts["g"] < 4 {
		t.Errorf("elements %v", counts)
	}
}

func TestTimeChart(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	var a, b TimeSeries
	a = TimeSeries{Name: "grpc", Color: ProtocolColor("grpc")}
	b = TimeSeries{Name: "rest errors", Color: ProtocolColor("rest"), Dashed: true}
	for i := 0; i < 30; i++ {
		a.Points = append(a.Points, Point{t0.Add(time.Duration(i) * time.Second), float64(100 + i)})
		b.Points = append(b.Points, Point{t0.Add(time.Duration(i) * time.Second), float64(i % 3)})
	}
	out := TimeChart("Throughput", "calls per second", []TimeSeries{a, b})
	wellFormed(t, out)
	if got := seriesNames(out); strings.Join(got, ",") != "grpc,rest errors" {
		t.Errorf("series %v", got)
	}
	for _, want := range []string{">03:00:00<", ">03:00:25<", ">150<", `stroke-dasharray="5 4"`, "calls per second", "time (UTC)"} {
		if !strings.Contains(out, want) {
			t.Errorf("time chart lacks %q", want)
		}
	}
	if n := strings.Count(out, "<circle"); n != 60 {
		t.Errorf("%d points, want 60", n)
	}
}

func TestChartsWithoutData(t *testing.T) {
	// Degenerate input still gives well-formed SVG, never a panic.
	wellFormed(t, CDFChart("empty", nil))
	wellFormed(t, CDFChart("zeros", []CDFSeries{{Name: "grpc", Levels: []float64{0.5}, Values: []float64{0}}}))
	wellFormed(t, BarPanels("none", nil, nil, "B", ""))
	wellFormed(t, BarPanels("zero", nil, []Panel{{Title: "x", Bars: []Bar{{Label: "grpc", Segments: []Segment{{"a", 0, "#000"}}}}}}, "B", ""))
	wellFormed(t, TimeChart("none", "calls", nil))
	one := TimeSeries{Name: "grpc", Color: "#000", Points: []Point{{time.Unix(0, 0), 5}}}
	wellFormed(t, TimeChart("one point", "calls", []TimeSeries{one}))
}

func TestProtocolColorsAreStable(t *testing.T) {
	if ProtocolColor("grpc") == ProtocolColor("rest") {
		t.Error("grpc and rest share a color")
	}
	if ProtocolColor("some-new-protocol") != ProtocolColor("some-new-protocol") {
		t.Error("an unknown protocol's color must be stable")
	}
}
