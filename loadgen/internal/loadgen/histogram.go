package loadgen

import (
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// histogram records latencies in microseconds, 1 µs to 1 h, with 3
// significant digits (an HDR histogram: fixed memory, any number of calls).
type histogram struct {
	h             *hdrhistogram.Histogram
	sum, min, max time.Duration // exact
}

const histogramMaxMicros = int64(time.Hour / time.Microsecond)

func newHistogram() *histogram {
	return &histogram{h: hdrhistogram.New(1, histogramMaxMicros, 3)}
}

func (h *histogram) record(d time.Duration) {
	us := max(1, min(int64(d/time.Microsecond), histogramMaxMicros))
	_ = h.h.RecordValue(us) // within the trackable range by construction
	if h.h.TotalCount() == 1 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.sum += d
}

func (h *histogram) count() int64 { return h.h.TotalCount() }

// quantileMs is the p-th percentile in milliseconds (0 when empty).
func (h *histogram) quantileMs(p float64) float64 {
	if h.count() == 0 {
		return 0
	}
	return usToMs(h.h.ValueAtQuantile(p))
}

func (h *histogram) minMs() float64 {
	if h.count() == 0 {
		return 0
	}
	return durToMs(h.min)
}

func (h *histogram) maxMs() float64 {
	if h.count() == 0 {
		return 0
	}
	return durToMs(h.max)
}

// meanMs is the exact mean (from the sum, not the buckets).
func (h *histogram) meanMs() float64 {
	if h.count() == 0 {
		return 0
	}
	return durToMs(h.sum / time.Duration(h.count()))
}

func durToMs(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*1e3) / 1e3
}

func usToMs(us int64) float64 { return math.Round(float64(us)) / 1e3 }
