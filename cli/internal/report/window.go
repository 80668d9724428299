package report

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Window is the time range a report covers: [Since, Until).
type Window struct {
	Since, Until time.Time
	RunID        string
	Source       string // how the window was chosen, for the reader
}

// Params are the saved queries' common parameters. Times are Unix seconds
// with milliseconds, which ClickHouse reads into DateTime64(3) without any
// time zone.
func (w Window) Params() map[string]string {
	return map[string]string{
		"since":  unixMillis(w.Since),
		"until":  unixMillis(w.Until),
		"run_id": w.RunID,
	}
}

func unixMillis(t time.Time) string {
	ms := t.UnixMilli()
	sign := ""
	if ms < 0 {
		sign, ms = "-", -ms
	}
	return fmt.Sprintf("%s%d.%03d", sign, ms/1000, ms%1000)
}

var durationRe = regexp.MustCompile(`^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$`)

// ParseSince reads a window length: Go durations (90s, 1h30m) and d or w
// for days and weeks (1d, 2w).
func ParseSince(text string) (time.Duration, error) {
	text = strings.TrimSpace(text)
	var d time.Duration
	if m := durationRe.FindStringSubmatch(text); m != nil && (m[2] == "d" || m[2] == "w") {
		v, _ := strconv.ParseFloat(m[1], 64)
		day := 24 * time.Hour
		if m[2] == "w" {
			day *= 7
		}
		d = time.Duration(v * float64(day))
	} else {
		var err error
		d, err = time.ParseDuration(text)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: expected e.g. 30s, 15m, 2h, 1h30m, 1d", text)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: the window must be longer than zero", text)
	}
	return d, nil
}

// ParseTime reads an instant: RFC 3339, "2006-01-02 15:04:05[.000]" (UTC
// unless an offset is given), a date (midnight UTC), or Unix seconds.
func ParseTime(text string) (time.Time, error) {
	text = strings.TrimSpace(text)
	if t, ok := parseUnix(text); ok {
		return t, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, text, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: expected RFC 3339 (2006-01-02T15:04:05Z), \"2006-01-02 15:04:05\" (UTC), a date, or Unix seconds", text)
}

// parseCHTime reads a DateTime or DateTime64 value as ClickHouse writes it
// in the server's time zone loc, or a Unix timestamp.
func parseCHTime(v any, loc *time.Location) (time.Time, bool) {
	switch x := v.(type) {
	case string:
		for _, layout := range []string{"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999Z07:00", "2006-01-02"} {
			if t, err := time.ParseInLocation(layout, x, loc); err == nil {
				return t, true
			}
		}
	}
	if t, ok := parseUnix(CellText(v)); ok {
		return t, true
	}
	return time.Time{}, false
}

var unixRe = regexp.MustCompile(`^(\d+)(?:\.(\d{1,9}))?$`)

// parseUnix reads Unix seconds with an optional fraction, exactly (no float rounding).
func parseUnix(text string) (time.Time, bool) {
	m := unixRe.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var nsec int64
	if m[2] != "" {
		frac := m[2] + strings.Repeat("0", 9-len(m[2]))
		nsec, _ = strconv.ParseInt(frac, 10, 64)
	}
	return time.Unix(sec, nsec).UTC(), true
}
