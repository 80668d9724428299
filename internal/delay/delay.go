// Package delay is the known latency a caller can ask either transport for,
// so that tests can check the durations wirelens records against delays
// they chose: a request header holds the response before it starts, another
// pauses a streamed response after its first message.
package delay

import (
	"context"
	"strconv"
	"time"

	"github.com/wirelens/wirelens/internal/apierr"
)

const (
	// HoldHeader holds the response this many milliseconds before it starts
	// (no header, no message leaves before then), on every call.
	HoldHeader = "x-wirelens-hold-ms"
	// PauseHeader pauses a response this many milliseconds after its first
	// part: a streamed gRPC response after its first message (a unary one has
	// no second part to pause), a REST answer after the headers and the first
	// half of its body (then sent chunked).
	PauseHeader = "x-wirelens-pause-ms"
	// Max bounds either delay, so a request cannot park a server goroutine
	// for long.
	Max = 10 * time.Second
)

// Delays is what a request asked for; zero values mean none.
type Delays struct {
	Hold  time.Duration
	Pause time.Duration
}

// FromHeaders reads HoldHeader and PauseHeader through values, which returns
// every value of a (lower-case) header name. An absent header is no delay; a
// repeated one, or one that is not whole milliseconds in 0..Max, is an
// InvalidArgument error.
func FromHeaders(values func(name string) []string) (Delays, error) {
	hold, err := parse(HoldHeader, values(HoldHeader))
	if err != nil {
		return Delays{}, err
	}
	pause, err := parse(PauseHeader, values(PauseHeader))
	if err != nil {
		return Delays{}, err
	}
	return Delays{Hold: hold, Pause: pause}, nil
}

func parse(name string, values []string) (time.Duration, error) {
	switch len(values) {
	case 0:
		return 0, nil
	case 1:
	default:
		return 0, apierr.InvalidArgument("%s given %d times, want at most once", name, len(values))
	}
	ms, err := strconv.ParseUint(values[0], 10, 32)
	if err != nil || time.Duration(ms)*time.Millisecond > Max {
		return 0, apierr.InvalidArgument("%s must be whole milliseconds in 0..%d, got %q",
			name, Max.Milliseconds(), values[0])
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Wait returns after d, or with ctx's error as soon as ctx is done.
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
