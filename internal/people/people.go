// Package people is the domain logic of the People service (experiment E3):
// it accepts persons one at a time or as a stream and does nothing with them,
// as E3's servers did. The generated wirelens.v1.Person is its data model.
package people

import (
	"context"
	"errors"
	"fmt"
	"io"

	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// Service implements the People operations independently of any transport.
type Service struct{}

// New returns a Service.
func New() *Service { return &Service{} }

// Register accepts one person.
func (s *Service) Register(ctx context.Context, p *wirelensv1.Person) error {
	return ctx.Err()
}

// RegisterBatch registers every person next returns until it returns io.EOF,
// and answers how many there were. Any other error from next ends the batch
// with that error.
func (s *Service) RegisterBatch(ctx context.Context, next func() (*wirelensv1.Person, error)) (int32, error) {
	var n int32
	for {
		p, err := next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("receiving person %d: %w", n+1, err)
		}
		if err := s.Register(ctx, p); err != nil {
			return n, err
		}
		n++
	}
}

// Example returns E3's person: kevin, aged 1 + i%50, two hobbies, in Seoul.
func Example(i int64) *wirelensv1.Person {
	return &wirelensv1.Person{
		Name:    "kevin",
		Age:     int32(1 + i%50),
		Hobbies: []string{"foot ball", "basket ball"},
		Address: &wirelensv1.Address{City: "seoul", ZipCode: "123456"},
	}
}
