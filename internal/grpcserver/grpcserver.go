// Package grpcserver is the gRPC transport of the wirelens services: the
// wirelens.v1 Hello, Math, People, Catalog and Echo implementations on top of
// the domain packages, plus the standard health service (grpc.health.v1) and
// server reflection.
package grpcserver

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/wirelens/wirelens/internal/domain"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// ServiceNames are the wirelens gRPC services New registers.
var ServiceNames = []string{
	wirelensv1.Hello_ServiceDesc.ServiceName,
	wirelensv1.Math_ServiceDesc.ServiceName,
	wirelensv1.People_ServiceDesc.ServiceName,
	wirelensv1.Catalog_ServiceDesc.ServiceName,
	wirelensv1.Echo_ServiceDesc.ServiceName,
}

// New returns a gRPC server with every wirelens service, health and
// reflection registered, and the health server (every service SERVING), so
// that shutdown can flip it to NOT_SERVING before draining. Every call honours
// the delays its metadata asks for (package delay).
func New(svc *domain.Services, opts ...grpc.ServerOption) (*grpc.Server, *health.Server) {
	delays := []grpc.ServerOption{grpc.ChainUnaryInterceptor(holdUnary), grpc.ChainStreamInterceptor(delayStream)}
	srv := grpc.NewServer(append(delays, opts...)...)
	wirelensv1.RegisterHelloServer(srv, NewHelloServer(svc.Hello))
	wirelensv1.RegisterMathServer(srv, NewMathServer(svc.Math))
	wirelensv1.RegisterPeopleServer(srv, NewPeopleServer(svc.People))
	wirelensv1.RegisterCatalogServer(srv, NewCatalogServer(svc.Catalog))
	wirelensv1.RegisterEchoServer(srv, NewEchoServer(svc.Echo))

	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	for _, name := range ServiceNames {
		hs.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}

	reflection.Register(srv)
	return srv, hs
}
