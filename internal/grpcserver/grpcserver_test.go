package grpcserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/wirelens/wirelens/internal/domain"
	"github.com/wirelens/wirelens/internal/hello"
	"github.com/wirelens/wirelens/internal/mathsvc"
	"github.com/wirelens/wirelens/internal/ops"
	"github.com/wirelens/wirelens/internal/people"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// services is shared by the tests: generating the catalog takes a moment.
var services = domain.New()

func dial(t *testing.T) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv, _ := New(services)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestSayHello(t *testing.T) {
	c := wirelensv1.NewHelloClient(dial(t))
	rep, err := c.SayHello(ctx(t), &wirelensv1.HelloRequest{Name: "wirelens"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.GetMessage() != "Hello, wirelens" {
		t.Fatalf("message = %q", rep.GetMessage())
	}
	// The E2 reference sizes: 17 bytes of protobuf for this answer.
	if n := proto.Size(rep); n != 17 {
		t.Fatalf("reply size = %d", n)
	}
}

func TestSayHelloBig(t *testing.T) {
	c := wirelensv1.NewHelloClient(dial(t))
	rep, err := c.SayHelloBig(ctx(t), &wirelensv1.HelloRequest{Name: "wirelens"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.GetMessage() != "Hello, wirelens" || !slices.Equal(rep.GetDataList(), hello.DataList()) {
		t.Fatalf("reply = %q + %d items", rep.GetMessage(), len(rep.GetDataList()))
	}
}

func TestHealth(t *testing.T) {
	c := healthpb.NewHealthClient(dial(t))
	for _, svc := range append([]string{""}, ServiceNames...) {
		rep, err := c.Check(ctx(t), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("Check(%q): %v", svc, err)
		}
		if rep.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) = %v", svc, rep.GetStatus())
		}
	}
	_, err := c.Check(ctx(t), &healthpb.HealthCheckRequest{Service: "nope"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Check(nope) err = %v, want NotFound", err)
	}
}

func TestReflectionListsHello(t *testing.T) {
	stream, err := reflectionpb.NewServerReflectionClient(dial(t)).ServerReflectionInfo(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	req := &reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
	}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	rep, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rep.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range append([]string{"grpc.health.v1.Health"}, ServiceNames...) {
		if !slices.Contains(names, want) {
			t.Fatalf("services = %v, missing %s", names, want)
		}
	}
	// Every service of the proto files is served.
	for _, op := range ops.All() {
		if svc := string(op.Method.Parent().FullName()); !slices.Contains(ServiceNames, svc) {
			t.Fatalf("ServiceNames lacks %s (%s)", svc, op.Name)
		}
	}
}

func TestCanceledMapsToStatus(t *testing.T) {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewHelloServer(hello.New()).SayHello(c, &wirelensv1.HelloRequest{})
	if status.Code(err) != codes.Canceled {
		t.Fatalf("err = %v, want Canceled", err)
	}
}

func TestCalculateFactorial(t *testing.T) {
	c := wirelensv1.NewMathClient(dial(t))
	rep, err := c.CalculateFactorial(ctx(t), &wirelensv1.FactorialRequest{Number: 10000})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := mathsvc.Factorial(context.Background(), 10000)
	if rep.GetResult() != want || rep.GetTimeTaken() <= 0 {
		t.Fatalf("reply = %v, want result %d", rep, want)
	}
	_, err = c.CalculateFactorial(ctx(t), &wirelensv1.FactorialRequest{Number: -1})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("number -1: err = %v, want InvalidArgument", err)
	}
}

func TestRegister(t *testing.T) {
	c := wirelensv1.NewPeopleClient(dial(t))
	rep, err := c.Register(ctx(t), people.Example(19))
	if err != nil || rep == nil {
		t.Fatalf("Register = %v, %v", rep, err)
	}
}

// TestRegisterBatch streams 10,000 persons (E3's largest batch but one) and
// expects them all counted.
func TestRegisterBatch(t *testing.T) {
	c := wirelensv1.NewPeopleClient(dial(t))
	for _, n := range []int{0, 1, 10_000} {
		stream, err := c.RegisterBatch(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := stream.Send(people.Example(int64(i))); err != nil {
				t.Fatalf("Send %d: %v", i, err)
			}
		}
		rep, err := stream.CloseAndRecv()
		if err != nil {
			t.Fatal(err)
		}
		if rep.GetCount() != int32(n) {
			t.Fatalf("count = %d, want %d", rep.GetCount(), n)
		}
	}
}

func TestCatalog(t *testing.T) {
	c := wirelensv1.NewCatalogClient(dial(t))
	p, err := c.GetProduct(ctx(t), &wirelensv1.GetProductRequest{Id: 42})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := services.Catalog.Get(context.Background(), 42)
	if !proto.Equal(p, want) {
		t.Fatalf("product 42 = %v", p)
	}
	if _, err := c.GetProduct(ctx(t), &wirelensv1.GetProductRequest{Id: 0}); status.Code(err) != codes.NotFound {
		t.Fatalf("id 0: err = %v, want NotFound", err)
	}
	l, err := c.ListProducts(ctx(t), &wirelensv1.ListProductsRequest{Count: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.GetProducts()) != 500 || l.GetProducts()[499].GetId() != 500 {
		t.Fatalf("ListProducts(500) = %d products", len(l.GetProducts()))
	}
	if n := proto.Size(l); n < 100_000 {
		t.Fatalf("ListProducts(500) = %d bytes of protobuf, want > 100 KB", n)
	}
}

func TestEchoUnaryAndServerStream(t *testing.T) {
	c := wirelensv1.NewEchoClient(dial(t))
	rep, err := c.Unary(ctx(t), &wirelensv1.EchoRequest{Content: "TestContent0"})
	if err != nil || rep.GetContent() != "TestContent0" {
		t.Fatalf("Unary = %v, %v", rep, err)
	}
	stream, err := c.ServerStream(ctx(t), &wirelensv1.EchoStreamRequest{Content: "x", Count: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		rep, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rep.GetContent() != "x" {
			t.Fatalf("reply %d = %q", n, rep.GetContent())
		}
		n++
	}
	if n != 1000 {
		t.Fatalf("got %d replies, want 1000", n)
	}
	stream, err = c.ServerStream(ctx(t), &wirelensv1.EchoStreamRequest{Count: -1})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("count -1: err = %v, want InvalidArgument", err)
	}
}

// TestBiStream sends E5's 10,000 messages on one stream while reading the
// echoes concurrently (as a real client must, or flow control stalls both
// sides), and expects them all back in order.
func TestBiStream(t *testing.T) {
	const n = 10_000
	stream, err := wirelensv1.NewEchoClient(dial(t)).BiStream(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		for i := range n {
			if err := stream.Send(&wirelensv1.EchoRequest{Content: "TestContent" + strconv.Itoa(i)}); err != nil {
				errc <- fmt.Errorf("Send %d: %w", i, err)
				return
			}
		}
		errc <- stream.CloseSend()
	}()
	for i := range n {
		rep, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv %d: %v", i, err)
		}
		if want := "TestContent" + strconv.Itoa(i); rep.GetContent() != want {
			t.Fatalf("reply %d = %q, want %q", i, rep.GetContent(), want)
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after %d replies: %v, want EOF", n, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
