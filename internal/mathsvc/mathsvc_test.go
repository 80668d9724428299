package mathsvc

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/wirelens/wirelens/internal/apierr"
)

func TestFactorial(t *testing.T) {
	for n, want := range map[int32]int64{
		0: 1, 1: 1, 2: 2, 5: 120, 12: 479001600 % Modulus, 13: 6227020800 % Modulus,
		// 20! = 2432902008176640000, taken mod 100000007.
		20: 2432902008176640000 % Modulus,
	} {
		got, err := Factorial(context.Background(), n)
		if err != nil || got != want {
			t.Errorf("Factorial(%d) = %d, %v; want %d", n, got, err, want)
		}
	}
	// Incremental check against a big n: (n)! = (n-1)! * n.
	a, _ := Factorial(context.Background(), 9999)
	b, _ := Factorial(context.Background(), 10000)
	if a*10000%Modulus != b {
		t.Fatalf("10000! != 9999! * 10000 (mod): %d %d", a, b)
	}
}

func TestFactorialBounds(t *testing.T) {
	for _, n := range []int32{-1, MaxNumber + 1} {
		if _, err := Factorial(context.Background(), n); apierr.Code(err) != codes.InvalidArgument {
			t.Errorf("Factorial(%d) err = %v, want InvalidArgument", n, err)
		}
	}
}

func TestCalculateFactorial(t *testing.T) {
	r, err := New().CalculateFactorial(context.Background(), 10000)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Factorial(context.Background(), 10000)
	if r.Value != want || r.TimeTaken <= 0 {
		t.Fatalf("result = %+v, want value %d", r, want)
	}
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New().CalculateFactorial(ctx, MaxNumber); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}
