package apierr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{nil, codes.OK},
		{NotFound("x"), codes.NotFound},
		{fmt.Errorf("wrapped: %w", InvalidArgument("bad %d", 1)), codes.InvalidArgument},
		{context.Canceled, codes.Canceled},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{status.Error(codes.Unavailable, "down"), codes.Unavailable},
		{errors.New("boom"), codes.Internal},
	} {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		err      error
		code     codes.Code
		contains string
	}{
		{fmt.Errorf("w: %w", NotFound("product %d not found", 7)), codes.NotFound, "product 7 not found"},
		{context.Canceled, codes.Canceled, ""},
		{errors.New("boom"), codes.Internal, "catalog: boom"},
	} {
		st, _ := status.FromError(Status("catalog", tc.err))
		if st.Code() != tc.code || (tc.contains != "" && st.Message() != tc.contains) {
			t.Errorf("Status(%v) = %v %q", tc.err, st.Code(), st.Message())
		}
	}
	if Status("x", nil) != nil {
		t.Error("Status(nil) != nil")
	}
}

func TestHTTPStatus(t *testing.T) {
	for c, want := range map[codes.Code]int{
		codes.OK: 200, codes.InvalidArgument: 400, codes.NotFound: 404, codes.Canceled: 499,
		codes.DeadlineExceeded: 504, codes.ResourceExhausted: 429, codes.Internal: 500,
		codes.Unimplemented: http.StatusNotImplemented,
	} {
		if got := HTTPStatus(c); got != want {
			t.Errorf("HTTPStatus(%v) = %d, want %d", c, got, want)
		}
	}
}
