// Package status holds the errors of failed calls: a Status carries a
// TensorFlow status code (wire.Code) and a message, Errorf makes one,
// CodeOf reads the code back from any error, and one sentinel per code
// serves errors.Is. It imports nothing but wire, so a handler that only
// returns errors needs no more than this package; rpc sends a handler's
// Status to the caller and hands the caller a Status back.
package status

import (
	"context"
	"errors"
	"fmt"

	"github.com/starwire/starwire/wire"
)

// A Status is a failed call's outcome: a TensorFlow status code and a
// message. Errors returned by rpc.Client calls wrap one; test them with
// errors.As(err, &st) or errors.Is(err, status.ErrUnavailable) and friends.
type Status struct {
	Code wire.Code
	Msg  string

	// cause is the local error the status was made from (Errorf's %w),
	// so that callers can branch on a transport's sentinel such as
	// tcp.ErrStalled; it does not cross the wire.
	cause error
}

// Unwrap returns the local error the status was made from, if any.
func (s *Status) Unwrap() error { return s.cause }

func (s *Status) Error() string { return s.Code.String() + ": " + s.Msg }

// Is reports whether target is the sentinel for s's code, or the context
// error the code stands for.
func (s *Status) Is(target error) bool {
	if t, ok := target.(*Status); ok {
		return t.Msg == "" && t.Code == s.Code
	}
	switch target {
	case context.DeadlineExceeded:
		return s.Code == wire.DeadlineExceeded
	case context.Canceled:
		return s.Code == wire.Cancelled
	}
	return false
}

// Errorf returns a Status error with code c. As with fmt.Errorf, a %w verb
// makes the status wrap that error.
func Errorf(c wire.Code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Status{Code: c, Msg: err.Error(), cause: errors.Unwrap(err)}
}

// Sentinels, one per code, for errors.Is.
var (
	ErrCancelled          = &Status{Code: wire.Cancelled}
	ErrUnknown            = &Status{Code: wire.Unknown}
	ErrInvalidArgument    = &Status{Code: wire.InvalidArgument}
	ErrDeadlineExceeded   = &Status{Code: wire.DeadlineExceeded}
	ErrNotFound           = &Status{Code: wire.NotFound}
	ErrAlreadyExists      = &Status{Code: wire.AlreadyExists}
	ErrPermissionDenied   = &Status{Code: wire.PermissionDenied}
	ErrResourceExhausted  = &Status{Code: wire.ResourceExhausted}
	ErrFailedPrecondition = &Status{Code: wire.FailedPrecondition}
	ErrAborted            = &Status{Code: wire.Aborted}
	ErrOutOfRange         = &Status{Code: wire.OutOfRange}
	ErrUnimplemented      = &Status{Code: wire.Unimplemented}
	ErrInternal           = &Status{Code: wire.Internal}
	ErrUnavailable        = &Status{Code: wire.Unavailable}
	ErrDataLoss           = &Status{Code: wire.DataLoss}
	ErrUnauthenticated    = &Status{Code: wire.Unauthenticated}
)

// CodeOf returns the status code carried by err: OK for nil, the Status's
// code when err wraps one, the matching code for context errors, Unknown
// otherwise.
func CodeOf(err error) wire.Code {
	if err == nil {
		return wire.OK // before st is declared: errors.As makes it escape
	}
	var st *Status
	switch {
	case errors.As(err, &st):
		return st.Code
	case errors.Is(err, context.DeadlineExceeded):
		return wire.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return wire.Cancelled
	}
	return wire.Unknown
}
