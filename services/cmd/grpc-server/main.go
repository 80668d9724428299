// Command grpc-server serves the wirelens.v1 services (Hello, Math, People,
// Catalog, Echo) over gRPC (h2c), with the standard health service
// (grpc.health.v1) and server reflection.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/wirelens/wirelens/internal/cli"
	"github.com/wirelens/wirelens/internal/domain"
	"github.com/wirelens/wirelens/internal/grpcserver"
	"github.com/wirelens/wirelens/internal/tracing"
)

func main() {
	cli.Main("grpc-server", run)
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("grpc-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", cli.EnvOr("WIRELENS_GRPC_LISTEN", "127.0.0.1:18090"),
		"address to listen on (env WIRELENS_GRPC_LISTEN)")
	grace := fs.Duration("shutdown-timeout", 10*time.Second, "how long to drain open RPCs on SIGINT/SIGTERM before a hard stop")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: grpc-server [flags]\n\n"+
			"Serves %s,\ngrpc.health.v1.Health and server reflection over gRPC (plaintext HTTP/2).\n\nFlags:\n",
			strings.Join(grpcserver.ServiceNames, ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}

	tr, err := tracing.Setup(ctx, "wirelens-grpc-server")
	if err != nil {
		return err
	}
	defer flushSpans(tr)
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	srv, hs := grpcserver.New(domain.New(), tr.GRPCServerOptions()...)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	slog.Info("grpc-server listening", "addr", lis.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	slog.Info("grpc-server shutting down")
	hs.Shutdown() // health checks answer NOT_SERVING while draining
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(*grace):
		slog.Warn("grpc-server drain timed out; stopping", "timeout", *grace)
		srv.Stop()
		<-stopped
	}
	// A stop that comes before Serve has started makes Serve return
	// ErrServerStopped: that is the stop asked for, not a failure.
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}

// flushSpans sends the spans still queued before the process exits (bounded).
func flushSpans(tr *tracing.Tracing) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		slog.Warn("flushing spans", "err", err)
	}
}
