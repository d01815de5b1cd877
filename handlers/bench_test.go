package handlers

import (
	"context"
	"fmt"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

var benchSizes = []int{1 << 10, 1 << 20} // floats

// BenchmarkRunGraph feeds a tensor through a client-terminated _Recv and
// fetches it back through a client-terminated _Send, over starwire (raw
// segments) and over gRPC (tensor_content), client and server in this
// process on loopback.
func BenchmarkRunGraph(b *testing.B) {
	task := startTask(b, Options{Job: "worker", Incarnation: 1})
	dev := task.w.Device()
	g := GraphDef(
		FeedNode("x", "x:0", wire.DTFloat, dev),
		NodeDef("y", "Identity", In("x"), Attrs("T", wire.DTFloat)),
		FetchNode("y/_send", "y", "y:0", wire.DTFloat, dev, 1),
	)
	ctx := context.Background()
	reg, err := task.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: g})
	if err != nil {
		b.Fatal(err)
	}
	xKey, yKey := FeedKey("x:0", dev), FetchKey("y:0", dev, 1)
	for _, n := range benchSizes {
		x := F32([]int64{int64(n)})
		xp, _ := tensor.ToProto(&x)
		b.Run(fmt.Sprintf("starwire/%dKiB", 4*n>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(2 * len(x.Data)))
			var out Fetched
			feeds := []Feed{{Key: xKey, Tensor: x}}
			step := int64(0)
			for b.Loop() {
				step++
				req := &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: step, RecvKey: []string{yKey}}
				if err := task.star.RunGraph(ctx, req, feeds, &out); err != nil {
					b.Fatal(err)
				}
				out.Release()
				task.w.rendezvous.Cleanup(step, errStepCleaned)
			}
		})
		b.Run(fmt.Sprintf("grpc/%dKiB", 4*n>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(2 * len(x.Data)))
			step := int64(1 << 40)
			for b.Loop() {
				step++
				req := &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: step,
					Send: []*tfpb.NamedTensorProto{{Name: xKey, Tensor: xp}}, RecvKey: []string{yKey}}
				if _, err := task.grpc.RunGraph(ctx, req); err != nil {
					b.Fatal(err)
				}
				task.w.rendezvous.Cleanup(step, errStepCleaned)
			}
		})
		x.Buf.Release()
	}
}

// BenchmarkRecvTensor pulls a tensor that is already in the rendezvous,
// over starwire as a worker's remote _Recv does (decoded in place, landing
// in a pooled buffer), and over gRPC.
func BenchmarkRecvTensor(b *testing.B) {
	task := startTask(b, Options{Job: "ps", Incarnation: 1})
	key := rendezvous.CreateKey(task.w.Device(), 1, "/job:worker/replica:0/task:0/device:CPU:0", "t", rendezvous.FrameIter{})
	ctx := context.Background()
	for _, n := range benchSizes {
		x := F32([]int64{int64(n)})
		b.Run(fmt.Sprintf("starwire/%dKiB", 4*n>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(x.Data)))
			dst := wire.Tensor{Shape: make([]int64, 0, 4)}
			for b.Loop() {
				task.w.rendezvous.Send(1, key, tensor.Ref(x))
				if _, err := recvTensorInto(ctx, task.star, 1, key, &dst); err != nil {
					b.Fatal(err)
				}
				dst.Buf.Release()
				dst.Buf, dst.Data = nil, nil
			}
		})
		b.Run(fmt.Sprintf("grpc/%dKiB", 4*n>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(x.Data)))
			for b.Loop() {
				task.w.rendezvous.Send(1, key, tensor.Ref(x))
				if _, err := task.grpc.RecvTensor(ctx, &tfpb.RecvTensorRequest{StepId: 1, RendezvousKey: key}); err != nil {
					b.Fatal(err)
				}
			}
		})
		x.Buf.Release()
	}
}

// BenchmarkFuseRecvTensor pulls 16 tensors of 4 KiB in one FuseRecvTensor
// call, against 16 RecvTensor calls in a row.
func BenchmarkFuseRecvTensor(b *testing.B) {
	task := startTask(b, Options{Job: "ps", Incarnation: 1})
	ctx := context.Background()
	const n = 16
	keys := make([]string, n)
	for i := range keys {
		keys[i] = rendezvous.CreateKey(task.w.Device(), 1, "/job:worker/replica:0/task:0/device:CPU:0", fmt.Sprintf("t%d", i), rendezvous.FrameIter{})
	}
	x := F32([]int64{1024})
	defer x.Buf.Release()
	// queue puts the n tensors in the rendezvous, as senders would.
	queue := func() {
		for _, k := range keys {
			task.w.rendezvous.Send(1, k, tensor.Ref(x))
		}
	}
	b.Run("fused", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(n * int64(len(x.Data)))
		var out Fetched
		for b.Loop() {
			queue()
			if err := task.star.FuseRecvTensor(ctx, 1, keys, &out); err != nil {
				b.Fatal(err)
			}
			out.Release()
		}
	})
	b.Run("separate", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(n * int64(len(x.Data)))
		var out Fetched
		for b.Loop() {
			queue()
			for _, k := range keys {
				if err := task.star.RecvTensor(ctx, &tfpb.RecvTensorRequest{StepId: 1, RendezvousKey: k}, &out); err != nil {
					b.Fatal(err)
				}
				out.Release()
			}
		}
	})
}
