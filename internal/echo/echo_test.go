package echo

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/wirelens/wirelens/internal/apierr"
)

func TestEcho(t *testing.T) {
	got, err := New().Echo(context.Background(), "TestContent0")
	if err != nil || got != "TestContent0" {
		t.Fatalf("Echo = %q, %v", got, err)
	}
}

func TestRepeat(t *testing.T) {
	var got []string
	err := New().Repeat(context.Background(), "x", 3, func(s string) error { got = append(got, s); return nil })
	if err != nil || !slices.Equal(got, []string{"x", "x", "x"}) {
		t.Fatalf("Repeat = %q, %v", got, err)
	}
	if err := New().Repeat(context.Background(), "x", -1, nil); apierr.Code(err) != codes.InvalidArgument {
		t.Fatalf("Repeat(-1) err = %v", err)
	}
}

func TestStreamInOrder(t *testing.T) {
	var in, out []string
	for i := range 1000 {
		in = append(in, "TestContent"+strconv.Itoa(i))
	}
	i := 0
	n, err := New().Stream(context.Background(),
		func() (string, error) {
			if i == len(in) {
				return "", io.EOF
			}
			i++
			return in[i-1], nil
		},
		func(s string) error { out = append(out, s); return nil })
	if err != nil || n != len(in) || !slices.Equal(in, out) {
		t.Fatalf("Stream = %d, %v; out equal %v", n, err, slices.Equal(in, out))
	}
}

func TestStreamSendError(t *testing.T) {
	boom := errors.New("boom")
	n, err := New().Stream(context.Background(),
		func() (string, error) { return "a", nil },
		func(string) error { return boom })
	if !errors.Is(err, boom) || n != 0 {
		t.Fatalf("Stream = %d, %v", n, err)
	}
}
