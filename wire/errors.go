package wire

import "errors"

// Sentinel errors; decoders wrap them with the frame's context, so callers
// test with errors.Is.
var (
	ErrShort     = errors.New("short input")
	ErrMagic     = errors.New("bad magic")
	ErrVersion   = errors.New("unsupported version")
	ErrKind      = errors.New("unknown frame kind")
	ErrTooLarge  = errors.New("over the size limit")
	ErrMalformed = errors.New("malformed frame")
	ErrDType     = errors.New("unsupported dtype")
	ErrShape     = errors.New("shape does not match the byte length")
)

// ErrClosed is wrapped by the errors of a connection that has been closed
// or has failed, on every transport: what Send returns then, what its
// pending sends complete with and what Receive returns. Package rpc
// exports it as rpc.ErrClosed; it lives here, below rpc, so that a
// transport that imports no rpc (afxdp) wraps the same value.
var ErrClosed = errors.New("rpc: connection closed")
