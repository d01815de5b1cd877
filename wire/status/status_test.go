package status

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/starwire/starwire/wire"
)

var errLocal = errors.New("local cause")

func TestCodeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want wire.Code
	}{
		{nil, wire.OK},
		{Errorf(wire.NotFound, "no graph %q", "g"), wire.NotFound},
		{fmt.Errorf("op: %w", Errorf(wire.Aborted, "x")), wire.Aborted},
		{context.DeadlineExceeded, wire.DeadlineExceeded},
		{fmt.Errorf("wait: %w", context.Canceled), wire.Cancelled},
		{errLocal, wire.Unknown},
	} {
		if got := CodeOf(tc.err); got != tc.want {
			t.Errorf("CodeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A Status is its code's sentinel and no other, the context error its
// code stands for, and unwraps to the local error it was made from.
func TestIs(t *testing.T) {
	err := fmt.Errorf("call: %w", Errorf(wire.DeadlineExceeded, "after 1s: %w", errLocal))
	for _, tc := range []struct {
		target error
		want   bool
	}{
		{ErrDeadlineExceeded, true}, {ErrUnavailable, false}, {context.DeadlineExceeded, true},
		{context.Canceled, false}, {errLocal, true}, {&Status{Code: wire.DeadlineExceeded, Msg: "m"}, false},
	} {
		if got := errors.Is(err, tc.target); got != tc.want {
			t.Errorf("errors.Is(%v, %v) = %v", err, tc.target, got)
		}
	}
	if got, want := err.Error(), "call: deadline exceeded: after 1s: local cause"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
