package xsk

import "errors"

var (
	// ErrConfig is wrapped by Open for invalid Config values.
	ErrConfig = errors.New("invalid config")
	// ErrClosed is returned by operations on a closed Socket.
	ErrClosed = errors.New("socket closed")
	// ErrTxStalled is wrapped by Kick when the kernel stopped draining the
	// TX ring before the kick budget ran out; the descriptors stay queued
	// and a later Kick resumes.
	ErrTxStalled = errors.New("tx ring not drained")
)
