// Package echo is the domain logic of the Echo service (experiment E5): it
// answers the content it is sent, once, a given number of times, or for every
// message of a stream, in order.
package echo

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/wirelens/wirelens/internal/apierr"
)

// MaxStreamCount bounds the replies of one server stream.
const MaxStreamCount = 1_000_000

// Service implements the Echo operations independently of any transport.
type Service struct{}

// New returns a Service.
func New() *Service { return &Service{} }

// Echo returns content.
func (s *Service) Echo(ctx context.Context, content string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return content, nil
}

// Repeat sends content count times (0..MaxStreamCount).
func (s *Service) Repeat(ctx context.Context, content string, count int32, send func(string) error) error {
	if count < 0 || count > MaxStreamCount {
		return apierr.InvalidArgument("count must be in 0..%d, got %d", MaxStreamCount, count)
	}
	for i := int32(0); i < count; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := send(content); err != nil {
			return fmt.Errorf("sending reply %d: %w", i+1, err)
		}
	}
	return nil
}

// Stream sends back every content recv returns, as it arrives, until recv
// returns io.EOF; it answers how many it echoed.
func (s *Service) Stream(ctx context.Context, recv func() (string, error), send func(string) error) (int, error) {
	n := 0
	for {
		content, err := recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("receiving message %d: %w", n+1, err)
		}
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if err := send(content); err != nil {
			return n, fmt.Errorf("sending reply %d: %w", n+1, err)
		}
		n++
	}
}
