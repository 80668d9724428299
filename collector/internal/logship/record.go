package logship

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// Missing is what Envoy's OpenTelemetry access logger writes for a value it
// does not have; a JSON null from the file access logger becomes the same, so
// records are identical whichever way Envoy exports them.
const Missing = "-"

// A line of Envoy's file access log (json_format, envoy/render.py):
//
//	{"time": "1700000000.123456789", "trace_id": "…32 hex…", "span_id": "…16 hex…",
//	 "body": "POST /v1/hello HTTP/1.1 200", "attributes": {"name": value, …}}
//
// Every key is optional. Attribute values become strings: JSON strings as
// they are, numbers in their JSON spelling, booleans as true/false, null as
// "-", objects and arrays as their JSON text.
type line struct {
	Time       json.RawMessage            `json:"time"`
	TraceID    string                     `json:"trace_id"`
	SpanID     string                     `json:"span_id"`
	Body       json.RawMessage            `json:"body"`
	Attributes map[string]json.RawMessage `json:"attributes"`
}

// appendRecord decodes one line into a new log record of sl. observed is when
// the shipper read it.
func appendRecord(sl plog.ScopeLogsSlice, raw []byte, observed time.Time) error {
	var l line
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&l); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	ts, err := parseTime(l.Time)
	if err != nil {
		return err
	}
	rec := sl.At(0).LogRecords().AppendEmpty()
	rec.SetObservedTimestamp(pcommon.NewTimestampFromTime(observed))
	if !ts.IsZero() {
		rec.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	}
	if id, ok := decodeID(l.TraceID, 16); ok {
		rec.SetTraceID(pcommon.TraceID(id))
	}
	if id, ok := decodeID(l.SpanID, 8); ok {
		rec.SetSpanID(pcommon.SpanID(id[:8]))
	}
	if len(l.Body) > 0 {
		rec.Body().SetStr(scalar(l.Body))
	}
	attrs := rec.Attributes()
	attrs.EnsureCapacity(len(l.Attributes))
	for k, v := range l.Attributes {
		attrs.PutStr(k, scalar(v))
	}
	return nil
}

// parseTime reads "seconds.fraction" (a JSON string or number), the form of
// %START_TIME(%s.%9f)%. Absent or "-" is the zero time.
func parseTime(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 {
		return time.Time{}, nil
	}
	text := scalar(raw)
	if text == Missing || text == "" {
		return time.Time{}, nil
	}
	secText, fracText, _ := strings.Cut(text, ".")
	sec, err := strconv.ParseInt(secText, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: want epoch seconds[.fraction]", text)
	}
	var nanos int64
	if fracText != "" {
		if len(fracText) > 9 {
			fracText = fracText[:9]
		}
		n, err := strconv.ParseInt(fracText, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("time %q: want epoch seconds[.fraction]", text)
		}
		for i := len(fracText); i < 9; i++ {
			n *= 10
		}
		nanos = n
	}
	return time.Unix(sec, nanos), nil
}

// decodeID reads a hex trace or span id of n bytes; "-", empty, all-zero or
// malformed ids are absent.
func decodeID(text string, n int) ([16]byte, bool) {
	var id [16]byte
	if len(text) != 2*n {
		return id, false
	}
	if _, err := hex.Decode(id[:n], []byte(text)); err != nil {
		return id, false
	}
	for _, b := range id[:n] {
		if b != 0 {
			return id, true
		}
	}
	return id, false
}

// scalar renders a JSON value as an attribute string (see line).
func scalar(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return s
		}
	case 'n':
		if string(raw) == "null" {
			return Missing
		}
	}
	return string(raw) // numbers, true/false, objects and arrays: their JSON text
}
