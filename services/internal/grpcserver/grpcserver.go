// Package grpcserver is the gRPC transport of the Hello service: the
// wirelens.v1.Hello implementation, plus the standard health service
// (grpc.health.v1) and server reflection.
package grpcserver

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
	"github.com/wirelens/wirelens/services/internal/hello"
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
		return nil, toStatus(err)
	}
	return &wirelensv1.HelloReply{Message: msg}, nil
}

// SayHelloBig implements wirelens.v1.Hello/SayHelloBig.
func (s *HelloServer) SayHelloBig(ctx context.Context, req *wirelensv1.HelloRequest) (*wirelensv1.HelloBigReply, error) {
	rep, err := s.svc.SayHelloBig(ctx, req.GetName())
	if err != nil {
		return nil, toStatus(err)
	}
	return &wirelensv1.HelloBigReply{Message: rep.Message, DataList: rep.DataList}, nil
}

func toStatus(err error) error {
	if st := status.FromContextError(err); st.Code() != codes.Unknown {
		return st.Err()
	}
	return status.Errorf(codes.Internal, "hello: %v", err)
}

// New returns a gRPC server with Hello, health and reflection registered, and
// the health server (every service SERVING), so that shutdown can flip it to
// NOT_SERVING before draining.
func New(svc *hello.Service, opts ...grpc.ServerOption) (*grpc.Server, *health.Server) {
	srv := grpc.NewServer(opts...)
	wirelensv1.RegisterHelloServer(srv, NewHelloServer(svc))

	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(wirelensv1.Hello_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)

	reflection.Register(srv)
	return srv, hs
}
