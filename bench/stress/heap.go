package stress

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// MethodHeap answers with the server's Go heap: the bytes in heap objects
// now and the most since the previous MethodHeap call, as two uint64s in
// the metadata. Memory a server allocates but has not touched yet does not
// show in its RSS; it shows here.
var MethodHeap = rpc.NewMethod("stress.Heap")

// heapEvery is how often the server samples its heap for the peak.
const heapEvery = 5 * time.Millisecond

var heapPeak struct {
	once sync.Once
	max  atomic.Uint64
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// watchHeap starts sampling the heap for its peak, for the life of the
// process (a stress server's).
func watchHeap() {
	heapPeak.once.Do(func() {
		go func() {
			for range time.Tick(heapEvery) {
				n := heapNow()
				for {
					old := heapPeak.max.Load()
					if n <= old || heapPeak.max.CompareAndSwap(old, n) {
						break
					}
				}
			}
		}()
	})
}

func heap(_ context.Context, _ *wire.Inbound, resp *rpc.Response) error {
	now := heapNow()
	peak := max(heapPeak.max.Swap(now), now)
	resp.Meta = binary.LittleEndian.AppendUint64(resp.Meta, now)
	resp.Meta = binary.LittleEndian.AppendUint64(resp.Meta, peak)
	return nil
}

// Heap asks the server behind c for its heap now and its peak since the
// previous call.
func Heap(ctx context.Context, c *rpc.Client) (now, peak int64, err error) {
	var r rpc.Reply
	if err := c.Call(ctx, MethodHeap, &rpc.Request{}, &r); err != nil {
		return 0, 0, err
	}
	defer r.Release()
	if len(r.Meta) != 16 {
		return 0, 0, fmt.Errorf("stress: heap answer of %d bytes", len(r.Meta))
	}
	return int64(binary.LittleEndian.Uint64(r.Meta)), int64(binary.LittleEndian.Uint64(r.Meta[8:])), nil
}
