package grpcserver

import (
	"context"

	"github.com/wirelens/wirelens/internal/apierr"
	"github.com/wirelens/wirelens/internal/mathsvc"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// MathServer implements wirelensv1.MathServer on top of the domain logic.
type MathServer struct {
	wirelensv1.UnimplementedMathServer
	svc *mathsvc.Service
}

var _ wirelensv1.MathServer = (*MathServer)(nil)

// NewMathServer returns the gRPC implementation of Math.
func NewMathServer(svc *mathsvc.Service) *MathServer {
	return &MathServer{svc: svc}
}

// CalculateFactorial implements wirelens.v1.Math/CalculateFactorial.
func (s *MathServer) CalculateFactorial(ctx context.Context, req *wirelensv1.FactorialRequest) (*wirelensv1.FactorialReply, error) {
	r, err := s.svc.CalculateFactorial(ctx, req.GetNumber())
	if err != nil {
		return nil, apierr.Status("math", err)
	}
	return &wirelensv1.FactorialReply{Result: r.Value, TimeTaken: float32(r.TimeTaken.Seconds())}, nil
}
