package loadgen

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseThink parses a think time: "1s-2s" (uniform in the range), "1.5s"
// (fixed) or "0" (none).
func ParseThink(s string) (lo, hi time.Duration, err error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, 0, nil
	}
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = time.ParseDuration(strings.TrimSpace(a)); err != nil {
		return 0, 0, fmt.Errorf("think time %q: want MIN-MAX like 1s-2s, or one duration", s)
	}
	hi = lo
	if isRange {
		if hi, err = time.ParseDuration(strings.TrimSpace(b)); err != nil {
			return 0, 0, fmt.Errorf("think time %q: want MIN-MAX like 1s-2s, or one duration", s)
		}
	}
	if lo < 0 || hi < lo {
		return 0, 0, fmt.Errorf("think time %q: want 0 <= MIN <= MAX", s)
	}
	return lo, hi, nil
}

// ParseRate parses a rate per second: "200/s", "600/m", "1000/h" or "200".
func ParseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	num, unit, _ := strings.Cut(s, "/")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("rate %q: want a number per second, e.g. 200/s (or /m, /h)", s)
	}
	switch strings.TrimSpace(unit) {
	case "", "s":
		return v, nil
	case "m":
		return v / 60, nil
	case "h":
		return v / 3600, nil
	}
	return 0, fmt.Errorf("rate %q: unit must be /s, /m or /h", s)
}

// ParseWarmup parses a warm-up: a number of calls ("50") or a duration
// ("10s"); "" or "0" is none.
func ParseWarmup(s string) (calls int, d time.Duration, err error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, 0, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return 0, 0, fmt.Errorf("warm-up %q must not be negative", s)
		}
		return n, 0, nil
	}
	if d, err = time.ParseDuration(s); err != nil || d < 0 {
		return 0, 0, fmt.Errorf("warm-up %q: want a number of calls (50) or a duration (10s)", s)
	}
	return 0, d, nil
}
