package wire

import "fmt"

// Code is a call's status, with TensorFlow's error.Code numbering, so it can
// travel in a TensorFlow status unchanged.
type Code int32

// Status codes.
const (
	OK                 Code = 0
	Cancelled          Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

var codeNames = [...]string{
	"ok", "cancelled", "unknown", "invalid argument", "deadline exceeded", "not found",
	"already exists", "permission denied", "resource exhausted", "failed precondition",
	"aborted", "out of range", "unimplemented", "internal", "unavailable", "data loss",
	"unauthenticated",
}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", int32(c))
}
