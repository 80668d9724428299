package loadgen

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/wirelens/wirelens/internal/catalog"
	"github.com/wirelens/wirelens/internal/hello"
	"github.com/wirelens/wirelens/internal/mathsvc"
	"github.com/wirelens/wirelens/internal/ops"
	"github.com/wirelens/wirelens/internal/people"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// workload is one operation's requests and the checks of its answers. Call
// indexes i are 0-based; message indexes j count within one stream.
type workload struct {
	op ops.Operation
	// perCall is true when request(i) or message(i, j) depend on i.
	perCall bool
	// request is the request of call i (unary and server-streaming methods).
	request func(i int64) proto.Message
	// message is message j of the stream of call i (client and bidi streaming).
	message func(i int64, j int) proto.Message
	// messages is how many messages a client or bidi stream sends.
	messages int
	// lockstep: a bidi stream sends each message after the previous reply.
	lockstep bool
	// replies is how many replies a server stream must answer.
	replies  int
	newReply func() proto.Message
	// check checks one reply against the request (or the stream message) it
	// answers; for client streaming req is nil.
	check func(req, rep proto.Message) error
}

// builders make the workload of each method loadgen drives.
var builders = map[protoreflect.FullName]func(cfg Config, w *workload) error{
	"wirelens.v1.Hello.SayHello":          helloWorkload(false),
	"wirelens.v1.Hello.SayHelloBig":       helloWorkload(true),
	"wirelens.v1.Math.CalculateFactorial": factorialWorkload,
	"wirelens.v1.People.Register":         registerWorkload,
	"wirelens.v1.People.RegisterBatch":    registerBatchWorkload,
	"wirelens.v1.Catalog.GetProduct":      getProductWorkload,
	"wirelens.v1.Catalog.ListProducts":    listProductsWorkload,
	"wirelens.v1.Echo.Unary":              echoUnaryWorkload,
	"wirelens.v1.Echo.ServerStream":       echoServerStreamWorkload,
	"wirelens.v1.Echo.BiStream":           echoBiStreamWorkload,
}

// Operations lists the operations loadgen can drive, sorted by gRPC path.
func Operations() []string {
	var names []string
	for _, op := range ops.All() {
		if _, ok := builders[op.Method.FullName()]; ok {
			names = append(names, op.Name)
		}
	}
	return names
}

func newWorkload(cfg Config) (*workload, error) {
	op, err := ops.Lookup(cfg.Operation)
	if err != nil {
		return nil, err
	}
	build, ok := builders[op.Method.FullName()]
	if !ok {
		return nil, fmt.Errorf("operation %s is not supported by loadgen (supported: %v)", cfg.Operation, Operations())
	}
	w := &workload{op: op}
	if err := build(cfg, w); err != nil {
		return nil, fmt.Errorf("operation %s: %w", op.Name, err)
	}
	return w, nil
}

// fixed makes request return the same message for every call.
func (w *workload) fixed(m proto.Message) {
	w.request = func(int64) proto.Message { return m }
}

// content is the echo content of call (or message) k: -content, or E5's
// "TestContent"+k.
func content(cfg Config, k int64) string {
	if cfg.Content != "" {
		return cfg.Content
	}
	return "TestContent" + strconv.FormatInt(k, 10)
}

func helloWorkload(big bool) func(Config, *workload) error {
	return func(cfg Config, w *workload) error {
		w.fixed(&wirelensv1.HelloRequest{Name: cfg.Name})
		want := hello.Greeting(cfg.Name)
		if !big {
			w.newReply = func() proto.Message { return new(wirelensv1.HelloReply) }
			w.check = func(_, m proto.Message) error {
				if got := m.(*wirelensv1.HelloReply).GetMessage(); got != want {
					return fmt.Errorf("reply message %q, want %q", got, want)
				}
				return nil
			}
			return nil
		}
		w.newReply = func() proto.Message { return new(wirelensv1.HelloBigReply) }
		w.check = func(_, m proto.Message) error {
			rep := m.(*wirelensv1.HelloBigReply)
			if got := rep.GetMessage(); got != want {
				return fmt.Errorf("reply message %q, want %q", got, want)
			}
			if !slices.Equal(rep.GetDataList(), hello.DataList()) {
				return fmt.Errorf("reply data list has %d items, not Item 0..Item %d", len(rep.GetDataList()), hello.BigItems-1)
			}
			return nil
		}
		return nil
	}
}

func factorialWorkload(cfg Config, w *workload) error {
	want, err := mathsvc.Factorial(context.Background(), int32(cfg.Number))
	if err != nil {
		return fmt.Errorf("-number: %w", err)
	}
	w.fixed(&wirelensv1.FactorialRequest{Number: int32(cfg.Number)})
	w.newReply = func() proto.Message { return new(wirelensv1.FactorialReply) }
	w.check = func(_, m proto.Message) error {
		if got := m.(*wirelensv1.FactorialReply).GetResult(); got != want {
			return fmt.Errorf("result %d, want %d", got, want)
		}
		return nil
	}
	return nil
}

func registerWorkload(cfg Config, w *workload) error {
	w.perCall = true
	w.request = func(i int64) proto.Message { return people.Example(i) }
	w.newReply = func() proto.Message { return new(emptypb.Empty) }
	w.check = func(_, _ proto.Message) error { return nil }
	return nil
}

func registerBatchWorkload(cfg Config, w *workload) error {
	w.perCall = true
	w.messages = cfg.Messages
	w.message = func(i int64, j int) proto.Message { return people.Example(i*int64(w.messages) + int64(j)) }
	w.newReply = func() proto.Message { return new(wirelensv1.RegisterBatchReply) }
	w.check = func(_, m proto.Message) error {
		if got := m.(*wirelensv1.RegisterBatchReply).GetCount(); int(got) != w.messages {
			return fmt.Errorf("count %d, want %d", got, w.messages)
		}
		return nil
	}
	return nil
}

func getProductWorkload(cfg Config, w *workload) error {
	if cfg.ID < 0 || cfg.ID > catalog.Size {
		return fmt.Errorf("-id must be in 0..%d (0 cycles through every id), got %d", catalog.Size, cfg.ID)
	}
	if cfg.ID == 0 {
		w.perCall = true
		w.request = func(i int64) proto.Message {
			return &wirelensv1.GetProductRequest{Id: int32(1 + i%catalog.Size)}
		}
	} else {
		w.fixed(&wirelensv1.GetProductRequest{Id: int32(cfg.ID)})
	}
	w.newReply = func() proto.Message { return new(wirelensv1.Product) }
	w.check = func(req, m proto.Message) error {
		p, want := m.(*wirelensv1.Product), req.(*wirelensv1.GetProductRequest).GetId()
		if p.GetId() != want || p.GetName() == "" {
			return fmt.Errorf("product id %d (name %q), want id %d", p.GetId(), p.GetName(), want)
		}
		return nil
	}
	return nil
}

func listProductsWorkload(cfg Config, w *workload) error {
	if cfg.Count > catalog.Size {
		return fmt.Errorf("-count must be in 1..%d, got %d", catalog.Size, cfg.Count)
	}
	w.fixed(&wirelensv1.ListProductsRequest{Count: int32(cfg.Count)})
	w.newReply = func() proto.Message { return new(wirelensv1.ListProductsReply) }
	w.check = func(_, m proto.Message) error {
		l := m.(*wirelensv1.ListProductsReply).GetProducts()
		if len(l) != cfg.Count {
			return fmt.Errorf("%d products, want %d", len(l), cfg.Count)
		}
		for k, p := range l {
			if p.GetId() != int32(k+1) {
				return fmt.Errorf("product %d has id %d, want %d", k, p.GetId(), k+1)
			}
		}
		return nil
	}
	return nil
}

func checkEcho(req, m proto.Message) error {
	want := req.(interface{ GetContent() string }).GetContent()
	if got := m.(*wirelensv1.EchoReply).GetContent(); got != want {
		return fmt.Errorf("echoed %q, want %q", got, want)
	}
	return nil
}

func echoUnaryWorkload(cfg Config, w *workload) error {
	w.perCall = cfg.Content == ""
	w.request = func(i int64) proto.Message { return &wirelensv1.EchoRequest{Content: content(cfg, i)} }
	w.newReply = func() proto.Message { return new(wirelensv1.EchoReply) }
	w.check = checkEcho
	return nil
}

func echoServerStreamWorkload(cfg Config, w *workload) error {
	w.perCall = cfg.Content == ""
	w.replies = cfg.Count
	w.request = func(i int64) proto.Message {
		return &wirelensv1.EchoStreamRequest{Content: content(cfg, i), Count: int32(cfg.Count)}
	}
	w.newReply = func() proto.Message { return new(wirelensv1.EchoReply) }
	w.check = checkEcho
	return nil
}

func echoBiStreamWorkload(cfg Config, w *workload) error {
	w.perCall = true
	w.messages = cfg.Messages
	w.lockstep = cfg.Lockstep
	w.message = func(i int64, j int) proto.Message {
		return &wirelensv1.EchoRequest{Content: content(cfg, i*int64(w.messages)+int64(j))}
	}
	w.newReply = func() proto.Message { return new(wirelensv1.EchoReply) }
	w.check = checkEcho
	return nil
}
