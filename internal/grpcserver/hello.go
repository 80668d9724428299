package grpcserver

import (
	"context"

	"github.com/wirelens/wirelens/internal/apierr"
	"github.com/wirelens/wirelens/internal/hello"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// HelloServer implements wirelensv1.HelloServer on top of the domain logic.
type HelloServer struct {
	wirelensv1.UnimplementedHelloServer
	svc *hello.Service
}

var _ wirelensv1.HelloServer = (*HelloServer)(nil)

// NewHelloServer returns the gRPC implementation of Hello.
func NewHelloServer(svc *hello.Service) *HelloServer {
	return &HelloServer{svc: svc}
}

// SayHello implements wirelens.v1.Hello/SayHello.
func (s *HelloServer) SayHello(ctx context.Context, req *wirelensv1.HelloRequest) (*wirelensv1.HelloReply, error) {
	msg, err := s.svc.SayHello(ctx, req.GetName())
	if err != nil {
		return nil, apierr.Status("hello", err)
	}
	return &wirelensv1.HelloReply{Message: msg}, nil
}

// SayHelloBig implements wirelens.v1.Hello/SayHelloBig.
func (s *HelloServer) SayHelloBig(ctx context.Context, req *wirelensv1.HelloRequest) (*wirelensv1.HelloBigReply, error) {
	rep, err := s.svc.SayHelloBig(ctx, req.GetName())
	if err != nil {
		return nil, apierr.Status("hello", err)
	}
	return &wirelensv1.HelloBigReply{Message: rep.Message, DataList: rep.DataList}, nil
}
