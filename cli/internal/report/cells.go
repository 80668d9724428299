package report

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// CellText renders a cell for a table: numbers as ClickHouse wrote them,
// NULL for nulls, arrays in ClickHouse's [a,b] notation.
func CellText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			if s, ok := e.(string); ok {
				parts[i] = strconv.Quote(s)
			} else {
				parts[i] = CellText(e)
			}
		}
		return "[" + strings.Join(parts, ",") + "]"
	case map[string]any:
		b, _ := json.Marshal(x)
		return string(b)
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// CellFloat reads a numeric cell (a JSON number, or a string holding one).
func CellFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil && !math.IsNaN(f)
	case float64:
		return x, !math.IsNaN(x)
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil && !math.IsNaN(f)
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// isNumeric reports whether a ClickHouse type holds numbers (for alignment).
func isNumeric(chType string) bool {
	t := chType
	for _, wrap := range []string{"Nullable(", "LowCardinality("} {
		if strings.HasPrefix(t, wrap) {
			t = strings.TrimSuffix(strings.TrimPrefix(t, wrap), ")")
		}
	}
	for _, p := range []string{"Int", "UInt", "Float", "Decimal", "BFloat"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}
