package bench

import (
	"sync"
	"testing"

	"github.com/valyala/bytebufferpool"
	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/wire/tfpb"
)

// metaBufs and putMetaBuf are rpc.CallProto's pool of metadata buffers
// (rpc/proto.go), as it is: a sync.Pool of byte slices starting at 512
// bytes, keeping none over 64 KiB.
var metaBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func putMetaBuf(bp *[]byte) {
	if cap(*bp) <= 64<<10 {
		metaBufs.Put(bp)
	}
}

// BenchmarkMetaPool marshals CallProto-shaped metadata into a pooled buffer
// with CallProto's pool (syncpool) and with valyala/bytebufferpool, the
// library the design named for this and rpc did not take, in parallel:
// small control requests only, and with one large one (a graph, 1 MiB) in
// 1000, which neither keeps (both allocate it again: B/op). Compare the
// pools as a ratio of the same run; on a shared machine, alternate short
// runs and take medians.
func BenchmarkMetaPool(b *testing.B) {
	small := &tfpb.RecvTensorRequest{StepId: 7, RendezvousKey: "/job:ps/replica:0/task:0/device:CPU:0;1;/job:worker/replica:0/task:0/device:CPU:0;w;0:0"}
	large := &tfpb.RecvTensorRequest{RendezvousKey: string(make([]byte, 1<<20))}
	for _, mix := range []struct {
		name  string
		every int
	}{{"small", 0}, {"mixed", 1000}} {
		pick := func(i int) proto.Message {
			if mix.every > 0 && i%mix.every == mix.every-1 {
				return large
			}
			return small
		}
		b.Run(mix.name, func(b *testing.B) { benchMetaPools(b, pick) })
	}
}

func benchMetaPools(b *testing.B, pick func(int) proto.Message) {
	b.Run("syncpool", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				bp := metaBufs.Get().(*[]byte)
				meta, err := proto.MarshalOptions{}.MarshalAppend((*bp)[:0], pick(i))
				if err != nil {
					b.Fatal(err)
				}
				*bp = meta
				putMetaBuf(bp)
			}
		})
	})
	b.Run("bytebufferpool", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				bb := bytebufferpool.Get()
				meta, err := proto.MarshalOptions{}.MarshalAppend(bb.B[:0], pick(i))
				if err != nil {
					b.Fatal(err)
				}
				bb.B = meta
				bytebufferpool.Put(bb)
			}
		})
	})
}
