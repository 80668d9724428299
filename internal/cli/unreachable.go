package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
)

// UnreachableError means nothing answered at a service's URL (refused, no
// such host, timed out), as opposed to the service answering with an error.
type UnreachableError struct {
	Service string // "ClickHouse", "Jaeger"
	URL     string
	Err     error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%s is not reachable at %s: %s", e.Service, e.URL, netReason(e.Err))
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// netReason turns a transport error into its short cause ("connection
// refused", "no such host", "timed out").
func netReason(err error) string {
	var errno syscall.Errno
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "no such host " + dnsErr.Name
		}
		return dnsErr.Error()
	case errors.As(err, &errno):
		return errno.Error()
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return "timed out"
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err.Error()
	}
	return err.Error()
}
