// Package hello is the domain logic of the Hello service (experiment E2):
// one implementation shared by the REST and the gRPC transports, so that the
// two protocols answer byte-for-byte the same content.
package hello

import (
	"context"
	"strconv"
)

// BigItems is the number of entries in SayHelloBig's data list.
const BigItems = 1000

// bigList is built once: "Item 0" .. "Item 999".
var bigList = func() []string {
	items := make([]string, BigItems)
	for i := range items {
		items[i] = "Item " + strconv.Itoa(i)
	}
	return items
}()

// Greeting returns the message both operations answer for name.
func Greeting(name string) string {
	return "Hello, " + name
}

// DataList returns SayHelloBig's list. The slice is shared between calls:
// callers must not modify it.
func DataList() []string {
	return bigList
}

// Service implements the Hello operations independently of any transport.
type Service struct{}

// New returns a Service.
func New() *Service { return &Service{} }

// SayHello returns "Hello, <name>".
func (s *Service) SayHello(ctx context.Context, name string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return Greeting(name), nil
}

// BigReply is SayHelloBig's answer.
type BigReply struct {
	Message  string
	DataList []string // shared, read-only (see DataList)
}

// SayHelloBig returns the greeting plus "Item 0" .. "Item 999".
func (s *Service) SayHelloBig(ctx context.Context, name string) (BigReply, error) {
	if err := ctx.Err(); err != nil {
		return BigReply{}, err
	}
	return BigReply{Message: Greeting(name), DataList: DataList()}, nil
}
