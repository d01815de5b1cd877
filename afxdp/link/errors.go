package link

import (
	"errors"
	"fmt"
)

// Errors callers branch on with errors.Is.
var (
	// ErrLinkClosed is returned by a Link's methods after Close.
	ErrLinkClosed = errors.New("link closed")
	// ErrLinkDown stops the use of an AF_XDP link whose interface went
	// down or was removed (it wraps ErrLinkClosed), so callers fall back
	// to another path at once.
	ErrLinkDown = fmt.Errorf("afxdp: interface down: %w", ErrLinkClosed)
	// ErrUnavailable is wrapped by Available and OpenXSK when AF_XDP cannot
	// be used on an interface; callers fall back to another transport.
	ErrUnavailable = errors.New("afxdp: AF_XDP unavailable")
)
