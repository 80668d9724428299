// Package clitest holds the checks every long-running command's main passes:
// it serves until its context is cancelled, answers -h with flag.ErrHelp and
// refuses a listen address it cannot bind.
package clitest

import (
	"context"
	"errors"
	"flag"
	"io"
	"testing"
	"time"
)

// Run is the shape of a server command's run function.
type Run func(ctx context.Context, args []string, stderr io.Writer) error

// Server runs the shared checks against run, each as a subtest.
func Server(t *testing.T, run Run) {
	t.Helper()
	t.Run("StopsOnCancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- run(ctx, []string{"-listen", "127.0.0.1:0"}, io.Discard) }()
		time.Sleep(50 * time.Millisecond)
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("run did not return after cancel")
		}
	})
	t.Run("Flags", func(t *testing.T) {
		if err := run(context.Background(), []string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("-h: %v", err)
		}
		if err := run(context.Background(), []string{"-listen", "256.0.0.1:1"}, io.Discard); err == nil {
			t.Fatal("bad -listen accepted")
		}
	})
}
