package grpcserver

import (
	"context"
	"net"
	"slices"
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

	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
	"github.com/wirelens/wirelens/services/internal/hello"
)

func dial(t *testing.T) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv, _ := New(hello.New())
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
	for _, svc := range []string{"", "wirelens.v1.Hello"} {
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
	if !slices.Contains(names, "wirelens.v1.Hello") || !slices.Contains(names, "grpc.health.v1.Health") {
		t.Fatalf("services = %v", names)
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
