package grpcserver

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/wirelens/wirelens/internal/apierr"
	"github.com/wirelens/wirelens/internal/people"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// PeopleServer implements wirelensv1.PeopleServer on top of the domain logic.
type PeopleServer struct {
	wirelensv1.UnimplementedPeopleServer
	svc *people.Service
}

var _ wirelensv1.PeopleServer = (*PeopleServer)(nil)

// NewPeopleServer returns the gRPC implementation of People.
func NewPeopleServer(svc *people.Service) *PeopleServer {
	return &PeopleServer{svc: svc}
}

// Register implements wirelens.v1.People/Register.
func (s *PeopleServer) Register(ctx context.Context, p *wirelensv1.Person) (*emptypb.Empty, error) {
	if err := s.svc.Register(ctx, p); err != nil {
		return nil, apierr.Status("people", err)
	}
	return &emptypb.Empty{}, nil
}

// RegisterBatch implements wirelens.v1.People/RegisterBatch (client
// streaming): it counts the persons until the client half-closes.
func (s *PeopleServer) RegisterBatch(stream grpc.ClientStreamingServer[wirelensv1.Person, wirelensv1.RegisterBatchReply]) error {
	n, err := s.svc.RegisterBatch(stream.Context(), stream.Recv)
	if err != nil {
		return apierr.Status("people", err)
	}
	return stream.SendAndClose(&wirelensv1.RegisterBatchReply{Count: n})
}
