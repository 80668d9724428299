package delay

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/wirelens/wirelens/internal/apierr"
)

func headers(kv ...string) func(string) []string {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h.Values
}

func TestFromHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func(string) []string
		want Delays
	}{
		{"none", headers(), Delays{}},
		{"hold", headers(HoldHeader, "150"), Delays{Hold: 150 * time.Millisecond}},
		{"pause", headers(PauseHeader, "400"), Delays{Pause: 400 * time.Millisecond}},
		{"both", headers(HoldHeader, "0", PauseHeader, "10000"), Delays{Pause: Max}},
	} {
		got, err := FromHeaders(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("%s: FromHeaders = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestFromHeadersRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func(string) []string
	}{
		{"over the bound", headers(HoldHeader, "10001")},
		{"negative", headers(HoldHeader, "-1")},
		{"signed", headers(PauseHeader, "+5")},
		{"fraction", headers(HoldHeader, "1.5")},
		{"unit", headers(PauseHeader, "5ms")},
		{"empty", headers(HoldHeader, "")},
		{"huge", headers(HoldHeader, "99999999999999999999")},
		{"repeated", headers(HoldHeader, "1", HoldHeader, "2")},
	} {
		_, err := FromHeaders(tc.in)
		if apierr.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: err = %v, want InvalidArgument", tc.name, err)
		}
	}
}

func TestWaitTakesAtLeastTheDelay(t *testing.T) {
	const d = 30 * time.Millisecond
	start := time.Now()
	if err := Wait(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < d {
		t.Fatalf("Wait(%v) returned after %v", d, took)
	}
}

func TestWaitStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := Wait(ctx, Max); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Wait outlived its context: %v", took)
	}
}
