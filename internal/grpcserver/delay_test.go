package grpcserver

import (
	"io"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/wirelens/wirelens/internal/delay"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

func TestHoldDelaysAUnaryAnswer(t *testing.T) {
	const hold = 150 * time.Millisecond
	c := wirelensv1.NewEchoClient(dial(t))
	callCtx := metadata.AppendToOutgoingContext(ctx(t), delay.HoldHeader, strconv.Itoa(int(hold.Milliseconds())))
	start := time.Now()
	rep, err := c.Unary(callCtx, &wirelensv1.EchoRequest{Content: "held"})
	if err != nil || rep.GetContent() != "held" {
		t.Fatalf("Unary = %v, %v", rep, err)
	}
	if took := time.Since(start); took < hold {
		t.Fatalf("answered after %v, want at least the hold %v", took, hold)
	}
}

func TestPauseSeparatesTheFirstMessageFromTheRest(t *testing.T) {
	const pause = 300 * time.Millisecond
	c := wirelensv1.NewEchoClient(dial(t))
	callCtx := metadata.AppendToOutgoingContext(ctx(t), delay.PauseHeader, strconv.Itoa(int(pause.Milliseconds())))
	start := time.Now()
	stream, err := c.ServerStream(callCtx, &wirelensv1.EchoStreamRequest{Content: "x", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	var arrivals []time.Duration
	for {
		_, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		arrivals = append(arrivals, time.Since(start))
	}
	end := time.Since(start)
	if len(arrivals) != 3 {
		t.Fatalf("got %d replies, want 3", len(arrivals))
	}
	if end < pause {
		t.Fatalf("stream ended after %v, want at least the pause %v", end, pause)
	}
	// The first message must have left before the pause, not with the rest:
	// half the pause is a margin for a loaded machine's delivery.
	if gap := arrivals[1] - arrivals[0]; gap < pause/2 {
		t.Fatalf("first reply at %v, second at %v: the pause did not separate them", arrivals[0], arrivals[1])
	}
}

func TestDelaysOutOfBoundsAreInvalidArguments(t *testing.T) {
	c := wirelensv1.NewEchoClient(dial(t))
	tooLong := strconv.Itoa(int(delay.Max.Milliseconds()) + 1)

	unaryCtx := metadata.AppendToOutgoingContext(ctx(t), delay.HoldHeader, tooLong)
	if _, err := c.Unary(unaryCtx, &wirelensv1.EchoRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("unary hold %s ms: err = %v, want InvalidArgument", tooLong, err)
	}

	streamCtx := metadata.AppendToOutgoingContext(ctx(t), delay.PauseHeader, "soon")
	stream, err := c.ServerStream(streamCtx, &wirelensv1.EchoStreamRequest{Count: 1})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("stream pause \"soon\": err = %v, want InvalidArgument", err)
	}
}
