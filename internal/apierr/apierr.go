// Package apierr is the error vocabulary the domain packages share with both
// transports: an error with a gRPC code, and the canonical mapping of those
// codes to HTTP statuses (the one grpc-gateway and Envoy's gRPC-JSON
// transcoder use), so that REST and gRPC fail the same way.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a failure with a gRPC status code. It implements GRPCStatus, so
// grpc-go answers its code and message when a handler returns it.
type Error struct {
	Code    codes.Code
	Message string
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Message }

// GRPCStatus returns the status grpc-go sends for e.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// New returns an *Error with code and a formatted message.
func New(code codes.Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidArgument returns an *Error with codes.InvalidArgument.
func InvalidArgument(format string, args ...any) error {
	return New(codes.InvalidArgument, format, args...)
}

// NotFound returns an *Error with codes.NotFound.
func NotFound(format string, args ...any) error {
	return New(codes.NotFound, format, args...)
}

// Code returns err's gRPC code: that of an *Error (or a gRPC status) in its
// chain, Canceled or DeadlineExceeded for context errors, Internal otherwise
// (OK for nil).
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	switch {
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return st.Code()
	}
	return codes.Internal
}

// Status converts err into a gRPC status error. The message of an internal
// error is prefixed with what, e.g. "catalog".
func Status(what string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e.GRPCStatus().Err()
	}
	if st := status.FromContextError(err); st.Code() != codes.Unknown {
		return st.Err()
	}
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	return status.Errorf(codes.Internal, "%s: %v", what, err)
}

// HTTPStatus maps a gRPC code to an HTTP status (google.rpc.Code's
// documented mapping; 499 for Canceled as nginx and Envoy use it).
func HTTPStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return 499
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	default: // Unknown, Internal, DataLoss
		return http.StatusInternalServerError
	}
}
