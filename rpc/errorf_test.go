package rpc

import (
	"errors"
	"fmt"
	"testing"

	"github.com/starwire/starwire/wire"
)

// errStalled stands for a transport's error, such as rpc/tcp's ErrStalled.
var errStalled = errors.New("tcp: peer stopped reading")

// TestErrorfWraps: a status made with %w keeps the error it was made from
// for errors.Is, keeps its own code for CodeOf and the sentinels, and
// says the cause in its message; %v keeps only the text.
func TestErrorfWraps(t *testing.T) {
	cause := fmt.Errorf("%w: nothing written for 1s", errStalled)
	for _, tc := range []struct {
		format    string
		wantCause bool
	}{
		{"send: %w", true},
		{"send: %v", false},
	} {
		err := error(&callError{op: "Tensor", peer: "ps:0", st: Errorf(wire.Unavailable, tc.format, cause).(*Status)})
		if got := errors.Is(err, errStalled); got != tc.wantCause {
			t.Errorf("%q: errors.Is(err, errStalled) = %v, want %v", tc.format, got, tc.wantCause)
		}
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrDeadlineExceeded) {
			t.Errorf("%q: %v does not match ErrUnavailable alone", tc.format, err)
		}
		if c := CodeOf(err); c != wire.Unavailable {
			t.Errorf("%q: CodeOf = %v, want Unavailable", tc.format, c)
		}
		if want := "rpc: call Tensor to ps:0: unavailable: send: " + cause.Error(); err.Error() != want {
			t.Errorf("%q: message %q, want %q", tc.format, err.Error(), want)
		}
	}
}
