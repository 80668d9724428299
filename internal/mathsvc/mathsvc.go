// Package mathsvc is the domain logic of the Math service (experiment E1):
// number! modulo 100000007, with the time the computation took, shared by the
// REST and the gRPC transports.
package mathsvc

import (
	"context"
	"time"

	"github.com/wirelens/wirelens/internal/apierr"
)

// Modulus is the modulus of the factorial (E1's 10^8+7).
const Modulus = 100_000_007

// MaxNumber bounds the argument: 10^7 multiplications take tens of
// milliseconds, and the service must not be a CPU sink for bad input.
const MaxNumber = 10_000_000

// checkEvery is how many multiplications run between two context checks.
const checkEvery = 1 << 16

// Factorial returns n! mod Modulus. It fails with InvalidArgument outside
// 0..MaxNumber and with the context's error when ctx ends first.
func Factorial(ctx context.Context, n int32) (int64, error) {
	if n < 0 || n > MaxNumber {
		return 0, apierr.InvalidArgument("number must be in 0..%d, got %d", MaxNumber, n)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	r := int64(1)
	for i := int64(2); i <= int64(n); i++ {
		r = r * i % Modulus
		if i%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
	}
	return r, nil
}

// Result is CalculateFactorial's answer.
type Result struct {
	Value     int64         // number! mod Modulus
	TimeTaken time.Duration // time spent computing
}

// Service implements the Math operations independently of any transport.
type Service struct{}

// New returns a Service.
func New() *Service { return &Service{} }

// CalculateFactorial computes number! mod Modulus and times it.
func (s *Service) CalculateFactorial(ctx context.Context, number int32) (Result, error) {
	start := time.Now()
	v, err := Factorial(ctx, number)
	if err != nil {
		return Result{}, err
	}
	return Result{Value: v, TimeTaken: time.Since(start)}, nil
}
