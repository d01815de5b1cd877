package protocol

import (
	"errors"
	"fmt"
	"testing"

	"github.com/starwire/starwire/wire"
)

// TestEndErrorsAreClosed: every error a session ends with is also
// wire.ErrClosed (rpc.ErrClosed) and stays itself, distinct from the
// others, wrapped or not.
func TestEndErrorsAreClosed(t *testing.T) {
	ends := []error{ErrClosed, ErrPeerClosed, ErrPeerUnreachable, ErrReset, ErrProtocol}
	for i, e := range ends {
		w := fmt.Errorf("afxdp: session 1 with 198.18.0.1:1: %w", e)
		if !errors.Is(w, wire.ErrClosed) {
			t.Errorf("%v is not wire.ErrClosed", e)
		}
		for j, o := range ends {
			if errors.Is(w, o) != (i == j) {
				t.Errorf("errors.Is(%v, %v) = %v", w, o, i != j)
			}
		}
	}
}
