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
