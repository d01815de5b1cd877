package rpc

import (
	"errors"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// Status errors live in package wire/status, which handlers import without
// importing rpc. These names are the same types and values, for rpc's own
// code and for generated stubs and programs that already spell them rpc.X.

// A Status is a failed call's outcome (status.Status).
type Status = status.Status

// Errorf returns a Status error with code c (status.Errorf).
func Errorf(c wire.Code, format string, args ...any) error {
	return status.Errorf(c, format, args...)
}

// CodeOf returns the status code carried by err (status.CodeOf).
func CodeOf(err error) wire.Code { return status.CodeOf(err) }

// Sentinels, one per code, for errors.Is: status's own values.
var (
	ErrCancelled          = status.ErrCancelled
	ErrUnknown            = status.ErrUnknown
	ErrInvalidArgument    = status.ErrInvalidArgument
	ErrDeadlineExceeded   = status.ErrDeadlineExceeded
	ErrNotFound           = status.ErrNotFound
	ErrAlreadyExists      = status.ErrAlreadyExists
	ErrPermissionDenied   = status.ErrPermissionDenied
	ErrResourceExhausted  = status.ErrResourceExhausted
	ErrFailedPrecondition = status.ErrFailedPrecondition
	ErrAborted            = status.ErrAborted
	ErrOutOfRange         = status.ErrOutOfRange
	ErrUnimplemented      = status.ErrUnimplemented
	ErrInternal           = status.ErrInternal
	ErrUnavailable        = status.ErrUnavailable
	ErrDataLoss           = status.ErrDataLoss
	ErrUnauthenticated    = status.ErrUnauthenticated
)

// callError wraps st with the operation, as "rpc: call GetStatus to ps:0: ...".
type callError struct {
	op, peer string
	st       *Status
}

func (e *callError) Error() string {
	return "rpc: call " + e.op + " to " + e.peer + ": " + e.st.Error()
}

func (e *callError) Unwrap() error { return e.st }

// errCode is the status for a frame that could not be received: too large
// for the receiver's limits, or malformed.
func errCode(err error) wire.Code {
	if errors.Is(err, wire.ErrTooLarge) {
		return wire.ResourceExhausted
	}
	return wire.InvalidArgument
}
