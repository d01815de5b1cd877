package checkpoint

import "errors"

// Sentinels callers branch on with errors.Is. Errors wrap them with the
// file and the entry concerned.
var (
	// ErrNotFound: no tensor of that name, or no checkpoint at a prefix.
	ErrNotFound = errors.New("checkpoint: not found")
	// ErrCorrupt: the files do not hold a valid checkpoint (bad checksum,
	// truncated data, impossible sizes, offsets or counts).
	ErrCorrupt = errors.New("checkpoint: corrupt")
	// ErrNoCheckpoint: a directory's state names no checkpoint that exists.
	ErrNoCheckpoint = errors.New("checkpoint: no checkpoint")
	// ErrMismatch: what was asked for does not fit what is stored (dtype,
	// shape, a slice out of bounds or not covered by the saved slices).
	ErrMismatch = errors.New("checkpoint: mismatch")
)
