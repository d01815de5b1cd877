package tcp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/rpctest"
	"github.com/starwire/starwire/wire"
)

// TestStallTimeoutFailsConnection: a peer that reads nothing while a 16 MiB
// request waits to be written fails the connection with ErrStalled after
// the transport's StallTimeout, long before the call's own deadline, so a
// stuck peer holds neither the caller nor the queued frame until then.
func TestStallTimeoutFailsConnection(t *testing.T) {
	addr, read, conns := rpctest.StuckPeer(t)
	defer func() {
		close(read)
		(<-conns).Close()
	}()
	const stall = 200 * time.Millisecond
	client := rpc.NewClient(addr, rpc.ClientOptions{Transport: &Transport{StallTimeout: stall}, Keepalive: rpc.Keepalive{Time: -1}})
	defer client.Close()
	// Far beyond the stall: only the stall timeout can end the call before
	// it, whatever the machine's load.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const size = 16 << 20
	data := make([]byte, size)
	pattern(data, 7)
	start := time.Now()
	var reply rpc.Reply
	err := client.Call(ctx, mTensor, &rpc.Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{size}, Data: data}}}, &reply)
	took := time.Since(start)
	if !errors.Is(err, ErrStalled) {
		t.Fatalf("call to a peer that reads nothing ended after %v with %v, want %v", took, err, ErrStalled)
	}
	if !errors.Is(err, rpc.ErrUnavailable) {
		t.Errorf("err = %v, want it to say the connection is unavailable as well", err)
	}
	if took < stall {
		t.Errorf("call failed after %v, before the stall timeout of %v", took, stall)
	}
	t.Logf("call failed after %v: %v", took, err)
}
