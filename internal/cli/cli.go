// Package cli holds the small pieces the commands share: defaults from the
// environment, a signal-aware context and the main of long-running commands.
package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// EnvOr returns the environment variable key, or def when it is unset or empty.
func EnvOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// SignalContext returns a context canceled on SIGINT or SIGTERM.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

// Main runs a long-running command: run gets a context cancelled on SIGINT or
// SIGTERM; the process exits 0 on success or -help, 1 on an error, which is
// logged under the command's name.
func Main(name string, run func(ctx context.Context, args []string, stderr io.Writer) error) {
	ctx, stop := SignalContext(context.Background())
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		slog.Error(name+" failed", "err", err)
		os.Exit(1)
	}
}
