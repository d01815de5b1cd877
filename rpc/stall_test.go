package rpc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/starwire/starwire/wire"
)

// TestStallTimeoutFailsConnection: a peer that reads nothing while a 16 MiB
// request waits to be written fails the connection with ErrStalled after
// the transport's StallTimeout, long before the call's own deadline, so a
// stuck peer holds neither the caller nor the queued frame until then.
func TestStallTimeoutFailsConnection(t *testing.T) {
	addr, read, conns := stuckPeer(t)
	defer func() {
		close(read)
		(<-conns).Close()
	}()
	const stall = 200 * time.Millisecond
	client := NewClient(addr, ClientOptions{Transport: &TCP{StallTimeout: stall}, Keepalive: Keepalive{Time: -1}})
	defer client.Close()
	// Far beyond the stall: only the stall timeout can end the call before
	// it, whatever the machine's load.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const size = 16 << 20
	data := make([]byte, size)
	pattern(data, 7)
	start := time.Now()
	var reply Reply
	err := client.Call(ctx, mTensor, &Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{size}, Data: data}}}, &reply)
	took := time.Since(start)
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("call to a peer that reads nothing ended after %v with %v, want %v", took, err, ErrStalled)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("err = %v, want it to say the connection is unavailable as well", err)
	}
	if took < stall {
		t.Errorf("call failed after %v, before the stall timeout of %v", took, stall)
	}
	t.Logf("call failed after %v: %v", took, err)
}

// TestErrorfWraps: a status made with %w keeps the error it was made from
// for errors.Is, keeps its own code for CodeOf and the sentinels, and
// says the cause in its message; %v keeps only the text.
func TestErrorfWraps(t *testing.T) {
	cause := fmt.Errorf("%w: nothing written for 1s", ErrStalled)
	for _, tc := range []struct {
		format    string
		wantCause bool
	}{
		{"send: %w", true},
		{"send: %v", false},
	} {
		err := error(&callError{op: "Tensor", peer: "ps:0", st: Errorf(wire.Unavailable, tc.format, cause).(*Status)})
		if got := errors.Is(err, ErrStalled); got != tc.wantCause {
			t.Errorf("%q: errors.Is(err, ErrStalled) = %v, want %v", tc.format, got, tc.wantCause)
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
