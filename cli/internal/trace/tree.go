package trace

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// TagPrefixes are the tags printed under each span (unless all tags are asked for).
var TagPrefixes = []string{"wirelens.", "rpc.", "http."}

// Node is a span with its children, in start order.
type Node struct {
	Span          *Span
	Service       string
	MissingParent string // the parent's span id when that span is not in the trace
	Children      []*Node
}

// Tree arranges a trace's spans by their references: roots are the spans
// whose parent is absent; siblings are sorted by start time, then span id.
func Tree(t *Trace) []*Node {
	nodes := make(map[string]*Node, len(t.Spans))
	for i := range t.Spans {
		sp := &t.Spans[i]
		nodes[sp.SpanID] = &Node{Span: sp, Service: t.Processes[sp.ProcessID].ServiceName}
	}
	var roots []*Node
	for i := range t.Spans {
		sp := &t.Spans[i]
		n := nodes[sp.SpanID]
		parent := ""
		for _, r := range sp.References {
			if r.RefType == "CHILD_OF" || parent == "" {
				parent = r.SpanID
			}
		}
		if p, ok := nodes[parent]; ok && parent != sp.SpanID {
			p.Children = append(p.Children, n)
			continue
		}
		n.MissingParent = parent
		roots = append(roots, n)
	}
	var order func([]*Node)
	order = func(list []*Node) {
		sort.SliceStable(list, func(i, j int) bool {
			a, b := list[i].Span, list[j].Span
			if a.StartTime != b.StartTime {
				return a.StartTime < b.StartTime
			}
			return a.SpanID < b.SpanID
		})
		for _, n := range list {
			order(n.Children)
		}
	}
	order(roots)
	return roots
}

// PrintOptions tune Print.
type PrintOptions struct {
	AllTags bool // every tag, not only wirelens.*, rpc.*, http.*
}

// Print writes the trace as an indented tree: service, operation name,
// duration and start offset (from the trace's first span) per span, and its
// tags sorted by key below it.
func Print(w io.Writer, t *Trace, opt PrintOptions) error {
	var b strings.Builder
	roots := Tree(t)
	var start, end int64
	for i, sp := range t.Spans {
		if i == 0 || sp.StartTime < start {
			start = sp.StartTime
		}
		if i == 0 || sp.StartTime+sp.Duration > end {
			end = sp.StartTime + sp.Duration
		}
	}
	services := map[string]bool{}
	for _, sp := range t.Spans {
		services[t.Processes[sp.ProcessID].ServiceName] = true
	}
	fmt.Fprintf(&b, "trace %s: %d span%s, %d service%s, %s, started %s\n", t.TraceID, len(t.Spans), plural(len(t.Spans)),
		len(services), plural(len(services)), FormatMicros(end-start),
		time.UnixMicro(start).UTC().Format("2006-01-02 15:04:05.000000 UTC"))
	for _, wmsg := range t.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", wmsg)
	}
	var walk func(n *Node, prefix string, last bool, root bool)
	walk = func(n *Node, prefix string, last, root bool) {
		branch, childPrefix := "├─ ", prefix+"│  "
		if last {
			branch, childPrefix = "└─ ", prefix+"   "
		}
		sp := n.Span
		service := n.Service
		if service == "" {
			service = "(unknown service)"
		}
		fmt.Fprintf(&b, "%s%s%s: %s  %s  at +%s  span %s", prefix, branch, service, sp.OperationName,
			FormatMicros(sp.Duration), FormatMicros(sp.StartTime-start), sp.SpanID)
		if root && n.MissingParent != "" {
			fmt.Fprintf(&b, "  (parent %s not in this trace)", n.MissingParent)
		}
		b.WriteString("\n")
		// Tags sit under the span, at its children's depth; a rule leads on to the children.
		tagPrefix := childPrefix + "   "
		if len(n.Children) > 0 {
			tagPrefix = childPrefix + "│  "
		}
		tags := selectTags(sp.Tags, opt.AllTags)
		width := 0
		for _, kv := range tags {
			width = max(width, len(kv.Key))
		}
		for _, kv := range tags {
			fmt.Fprintf(&b, "%s%-*s  %s\n", tagPrefix, width, kv.Key, FormatValue(kv.Value))
		}
		for _, w := range sp.Warnings {
			fmt.Fprintf(&b, "%swarning: %s\n", tagPrefix, w)
		}
		for i, c := range n.Children {
			walk(c, childPrefix, i == len(n.Children)-1, false)
		}
	}
	for i, r := range roots {
		walk(r, "", i == len(roots)-1, true)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the trace: %w", err)
	}
	return nil
}

func selectTags(tags []KeyValue, all bool) []KeyValue {
	var out []KeyValue
	for _, kv := range tags {
		keep := all
		for _, p := range TagPrefixes {
			keep = keep || strings.HasPrefix(kv.Key, p)
		}
		if keep {
			out = append(out, kv)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// FormatValue writes a tag's value: numbers as integers when integral.
func FormatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e18 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}

// FormatMicros writes a duration given in microseconds: µs below a
// millisecond, ms with three decimals below a second, else seconds.
func FormatMicros(us int64) string {
	switch {
	case us < 1000 && us > -1000:
		return fmt.Sprintf("%d µs", us)
	case us < 1_000_000 && us > -1_000_000:
		return fmt.Sprintf("%.3f ms", float64(us)/1000)
	default:
		return fmt.Sprintf("%.3f s", float64(us)/1e6)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
