// Package clitest holds what the commands' tests share: the checks every
// long-running command's main passes (it serves until its context is
// cancelled, answers -h with flag.ErrHelp and refuses a listen address it
// cannot bind) and a URL where nothing listens.
package clitest

import (
	"context"
	"errors"
	"flag"
	"io"
	"net"
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

// ClosedURL is an http:// URL on loopback where nothing listens: a port that
// was free a moment ago, for the "unreachable" paths of a client.
func ClosedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	return url
}
