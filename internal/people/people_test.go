package people

import (
	"context"
	"errors"
	"io"
	"testing"

	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

func TestRegisterBatchCounts(t *testing.T) {
	i := 0
	next := func() (*wirelensv1.Person, error) {
		if i == 10000 {
			return nil, io.EOF
		}
		i++
		return Example(int64(i)), nil
	}
	n, err := New().RegisterBatch(context.Background(), next)
	if err != nil || n != 10000 {
		t.Fatalf("RegisterBatch = %d, %v", n, err)
	}
}

func TestRegisterBatchStopsOnError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	n, err := New().RegisterBatch(context.Background(), func() (*wirelensv1.Person, error) {
		calls++
		if calls == 3 {
			return nil, boom
		}
		return Example(0), nil
	})
	if !errors.Is(err, boom) || n != 2 {
		t.Fatalf("RegisterBatch = %d, %v", n, err)
	}
}

func TestRegisterCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := New().Register(ctx, Example(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestExample(t *testing.T) {
	if a := Example(0).GetAge(); a != 1 {
		t.Fatalf("age(0) = %d", a)
	}
	if a := Example(49).GetAge(); a != 50 {
		t.Fatalf("age(49) = %d", a)
	}
	if a := Example(50).GetAge(); a != 1 {
		t.Fatalf("age(50) = %d", a)
	}
}
