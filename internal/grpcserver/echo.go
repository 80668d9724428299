package grpcserver

import (
	"context"

	"google.golang.org/grpc"

	"github.com/wirelens/wirelens/internal/apierr"
	"github.com/wirelens/wirelens/internal/echo"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// EchoServer implements wirelensv1.EchoServer on top of the domain logic.
type EchoServer struct {
	wirelensv1.UnimplementedEchoServer
	svc *echo.Service
}

var _ wirelensv1.EchoServer = (*EchoServer)(nil)

// NewEchoServer returns the gRPC implementation of Echo.
func NewEchoServer(svc *echo.Service) *EchoServer {
	return &EchoServer{svc: svc}
}

// Unary implements wirelens.v1.Echo/Unary.
func (s *EchoServer) Unary(ctx context.Context, req *wirelensv1.EchoRequest) (*wirelensv1.EchoReply, error) {
	content, err := s.svc.Echo(ctx, req.GetContent())
	if err != nil {
		return nil, apierr.Status("echo", err)
	}
	return &wirelensv1.EchoReply{Content: content}, nil
}

// ServerStream implements wirelens.v1.Echo/ServerStream: count replies.
func (s *EchoServer) ServerStream(req *wirelensv1.EchoStreamRequest, stream grpc.ServerStreamingServer[wirelensv1.EchoReply]) error {
	err := s.svc.Repeat(stream.Context(), req.GetContent(), req.GetCount(), func(content string) error {
		return stream.Send(&wirelensv1.EchoReply{Content: content})
	})
	return apierr.Status("echo", err)
}

// BiStream implements wirelens.v1.Echo/BiStream: every message is echoed as
// it arrives, in order, until the client half-closes.
func (s *EchoServer) BiStream(stream grpc.BidiStreamingServer[wirelensv1.EchoRequest, wirelensv1.EchoReply]) error {
	recv := func() (string, error) {
		m, err := stream.Recv()
		return m.GetContent(), err
	}
	send := func(content string) error {
		return stream.Send(&wirelensv1.EchoReply{Content: content})
	}
	_, err := s.svc.Stream(stream.Context(), recv, send)
	return apierr.Status("echo", err)
}
