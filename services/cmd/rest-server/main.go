// Command rest-server serves the Hello operations as REST/JSON over HTTP/1.1
// and h2c (POST /v1/hello, POST /v1/hello-big, GET /healthz).
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
	"os"
	"time"

	"github.com/wirelens/wirelens/services/internal/cli"
	"github.com/wirelens/wirelens/services/internal/hello"
	"github.com/wirelens/wirelens/services/internal/restserver"
)

func main() {
	ctx, stop := cli.SignalContext(context.Background())
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		slog.Error("rest-server failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("rest-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", cli.EnvOr("WIRELENS_REST_LISTEN", "127.0.0.1:18080"),
		"address to listen on (env WIRELENS_REST_LISTEN)")
	grace := fs.Duration("shutdown-timeout", 10*time.Second, "how long to drain open requests on SIGINT/SIGTERM")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: rest-server [flags]\n\n"+
			"Serves the Hello operations as REST/JSON over HTTP/1.1 and h2c:\n"+
			"  POST /v1/hello, POST /v1/hello-big  body {\"name\":\"...\"}\n"+
			"  GET /healthz                         200 ok\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}

	h, err := restserver.NewHandler(hello.New())
	if err != nil {
		return fmt.Errorf("building routes: %w", err)
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *listen, err)
	}
	srv := restserver.NewServer(*listen, h)
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
