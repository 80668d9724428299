// Package cli holds the small pieces the commands share: defaults from the
// environment and a signal-aware context.
package cli

import (
	"context"
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
