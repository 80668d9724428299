// Command rest-server serves every google.api.http route of the wirelens
// protos (Hello, Math, People, Catalog, Echo) over HTTP/1.1 and h2c, as JSON
// or, on request, protobuf; plus GET /healthz.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/wirelens/wirelens/internal/cli"
	"github.com/wirelens/wirelens/internal/domain"
	"github.com/wirelens/wirelens/internal/ops"
	"github.com/wirelens/wirelens/internal/restserver"
	"github.com/wirelens/wirelens/internal/tracing"
)

func main() {
	cli.Main("rest-server", run)
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("rest-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", cli.EnvOr("WIRELENS_REST_LISTEN", "127.0.0.1:18080"),
		"address to listen on (env WIRELENS_REST_LISTEN)")
	grace := fs.Duration("shutdown-timeout", 10*time.Second, "how long to drain open requests on SIGINT/SIGTERM")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: rest-server [flags]\n\n"+
			"Serves the wirelens operations over HTTP/1.1 and h2c. Bodies are proto3 JSON;\n"+
			"Accept: application/protobuf answers protobuf, Content-Type: application/protobuf\n"+
			"sends it. Routes (from the protos' google.api.http annotations):\n")
		for _, op := range ops.All() {
			for _, r := range op.HTTPRules {
				fmt.Fprintf(fs.Output(), "  %-6s %-20s %s\n", r.Method, r.Pattern, op.Name)
			}
		}
		fmt.Fprintf(fs.Output(), "  %-6s %-20s %s\n\nFlags:\n", "GET", "/healthz", "200 ok")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}

	tr, err := tracing.Setup(ctx, "wirelens-rest-server")
	if err != nil {
		return err
	}
	defer flushSpans(tr)
	h, err := restserver.NewHandler(domain.New())
	if err != nil {
		return fmt.Errorf("building routes: %w", err)
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	srv := restserver.NewServer(*listen, tr.HTTPHandler(h, "rest-server"))
	srv.BaseContext = func(net.Listener) context.Context { return ctx }

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	slog.Info("rest-server listening", "addr", lis.Addr().String(), "protocols", "http/1.1,h2c")

	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	slog.Info("rest-server shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
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
