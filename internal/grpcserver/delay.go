package grpcserver

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/wirelens/wirelens/internal/apierr"
	"github.com/wirelens/wirelens/internal/delay"
)

// requestedDelays reads the delays of package delay from the call's metadata.
func requestedDelays(ctx context.Context) (delay.Delays, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return delay.FromHeaders(md.Get)
}

// holdUnary holds a unary call's response before the handler runs, so that
// neither its headers nor its message leave earlier.
func holdUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	delays, err := requestedDelays(ctx)
	if err != nil {
		return nil, apierr.Status("delay", err)
	}
	if err := delay.Wait(ctx, delays.Hold); err != nil {
		return nil, apierr.Status("delay", fmt.Errorf("holding the response %v: %w", delays.Hold, err))
	}
	return handler(ctx, req)
}

// delayStream holds a streaming call before the handler runs and pauses its
// response right after the first message it sends.
func delayStream(srv any, stream grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	delays, err := requestedDelays(stream.Context())
	if err != nil {
		return apierr.Status("delay", err)
	}
	if err := delay.Wait(stream.Context(), delays.Hold); err != nil {
		return apierr.Status("delay", fmt.Errorf("holding the response %v: %w", delays.Hold, err))
	}
	if delays.Pause > 0 {
		stream = &pausingStream{ServerStream: stream, pause: delays.Pause}
	}
	return handler(srv, stream)
}

// pausingStream waits pause after its first message has been handed to the
// transport, which sends it (and the response headers) meanwhile.
type pausingStream struct {
	grpc.ServerStream
	pause  time.Duration
	paused bool
}

func (s *pausingStream) SendMsg(m any) error {
	if err := s.ServerStream.SendMsg(m); err != nil {
		return err
	}
	if s.paused {
		return nil
	}
	s.paused = true
	if err := delay.Wait(s.Context(), s.pause); err != nil {
		return fmt.Errorf("pausing after the first message %v: %w", s.pause, err)
	}
	return nil
}
