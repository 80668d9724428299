package restserver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/wirelens/wirelens/internal/delay"
)

func TestHoldDelaysTheAnswer(t *testing.T) {
	const hold = 150 * time.Millisecond
	h := newHandler(t)
	start := time.Now()
	rec := doWith(t, h, "GET", "/v1/echo?content=held", nil,
		http.Header{http.CanonicalHeaderKey(delay.HoldHeader): {strconv.Itoa(int(hold.Milliseconds()))}})
	if took := time.Since(start); took < hold {
		t.Fatalf("answered after %v, want at least the hold %v", took, hold)
	}
	if rec.Code != http.StatusOK || rec.Body.String() != `{"content":"held"}` {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestDelaysOutOfBoundsAre400(t *testing.T) {
	h := newHandler(t)
	for _, header := range []http.Header{
		{http.CanonicalHeaderKey(delay.HoldHeader): {strconv.Itoa(int(delay.Max.Milliseconds()) + 1)}},
		{http.CanonicalHeaderKey(delay.PauseHeader): {"-3"}},
	} {
		rec := doWith(t, h, "GET", "/v1/echo?content=x", nil, header)
		var body ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusBadRequest ||
			body.Code != codes.InvalidArgument {
			t.Fatalf("%v: %d %s", header, rec.Code, rec.Body)
		}
	}
}
