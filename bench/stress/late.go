package stress

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// MethodLate answers with the longest a sleeping goroutine of the server
// woke past its time since the previous MethodLate call, in nanoseconds as
// one uint64 in the metadata: the server's side of what SchedLate measures
// in the client. The first call starts the measure and answers 0.
var MethodLate = rpc.NewMethod("stress.Late")

var serverLate struct {
	once sync.Once
	max  atomic.Int64
}

// watchLate starts measuring the server's lateness for the life of the
// process.
func watchLate() {
	serverLate.once.Do(func() {
		go schedLate(func(late time.Duration) {
			for {
				old := serverLate.max.Load()
				if int64(late) <= old || serverLate.max.CompareAndSwap(old, int64(late)) {
					return
				}
			}
		}, nil, nil)
	})
}

func late(_ context.Context, _ *wire.Inbound, resp *rpc.Response) error {
	watchLate()
	resp.Meta = binary.LittleEndian.AppendUint64(resp.Meta, uint64(serverLate.max.Swap(0)))
	return nil
}

// Late asks the server behind c for the longest it woke a goroutine late
// since the previous call; the first call starts the measure.
func Late(ctx context.Context, c *rpc.Client) (time.Duration, error) {
	var r rpc.Reply
	if err := c.Call(ctx, MethodLate, &rpc.Request{}, &r); err != nil {
		return 0, err
	}
	defer r.Release()
	if len(r.Meta) != 8 {
		return 0, fmt.Errorf("stress: late answer of %d bytes", len(r.Meta))
	}
	return time.Duration(binary.LittleEndian.Uint64(r.Meta)), nil
}

// WatchLate starts measuring how late this process wakes a sleeping
// goroutine, as MethodLate does in the server; the function it returns
// stops the measure and returns the longest seen. A test bounding how
// long something takes in real time adds a multiple of it, so that what
// the machine added by running the process late is not blamed on the
// code under test.
func WatchLate() (stop func() time.Duration) {
	var worst atomic.Int64
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		schedLate(func(late time.Duration) {
			if int64(late) > worst.Load() {
				worst.Store(int64(late))
			}
		}, done, nil)
	}()
	return sync.OnceValue(func() time.Duration {
		close(done)
		<-ended
		return time.Duration(worst.Load())
	})
}
