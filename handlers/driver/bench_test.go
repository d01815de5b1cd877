package driver

import (
	"context"
	"fmt"
	"testing"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// BenchmarkStep runs the two-partition step of TestTwoPartitionStep: a feed
// to the ps, RecvTensor from the worker, a fetch back, and the cleanup of
// both tasks; five calls per step.
func BenchmarkStep(b *testing.B) {
	for _, protocol := range []string{"grpc+seastar", "grpc"} {
		for _, size := range []int{256, 64 << 10} {
			b.Run(fmt.Sprintf("%s/%dB", protocol, size), func(b *testing.B) {
				ctx := context.Background()
				tc := newTestCluster(b, protocol)
				d := tc.driver(b)
				status, err := d.Status(ctx)
				if err != nil {
					b.Fatal(err)
				}
				psInc := status[psTask].GetDeviceAttributes()[0].GetIncarnation()
				if err := d.CreateSessions(ctx, nil); err != nil {
					b.Fatal(err)
				}
				psGraph, err := d.RegisterGraph(ctx, psTask, &tfpb.GraphDef{Node: []*tfpb.NodeDef{
					recvNode("x", "x:0", workerDev, clientInc, psDev, wire.DTFloat, true),
					{Name: "y", Op: "Mul", Input: []string{"x", "x"}, Attr: map[string]*tfpb.AttrValue{"T": typeAttr(wire.DTFloat)}},
					sendNode("y/_send", "y", "y:0", psDev, psInc, workerDev, wire.DTFloat, false),
				}})
				if err != nil {
					b.Fatal(err)
				}
				wGraph, err := d.RegisterGraph(ctx, workerTask, &tfpb.GraphDef{Node: []*tfpb.NodeDef{
					recvNode("y/_recv", "y:0", psDev, psInc, workerDev, wire.DTFloat, false),
					sendNode("z/_send", "y/_recv", "z:0", workerDev, 1, workerDev, wire.DTFloat, true),
				}})
				if err != nil {
					b.Fatal(err)
				}
				feed := wire.Tensor{DType: wire.DTFloat, Shape: []int64{int64(size / 4)}, Data: make([]byte, size)}
				feedKey := key(workerDev, clientInc, psDev, "x:0")
				fetchKey := key(workerDev, 1, workerDev, "z:0")
				var out handlers.Fetched
				b.SetBytes(int64(2 * size))
				b.ReportAllocs()
				step := int64(0)
				for b.Loop() {
					step++
					if err := d.RunPartitions(ctx, step,
						Partition{Graph: psGraph, Feeds: []handlers.Feed{{Key: feedKey, Tensor: feed}}},
						Partition{Graph: wGraph, Fetches: []string{fetchKey}, Out: &out}); err != nil {
						b.Fatal(err)
					}
					out.Release()
					if err := d.CleanupStep(ctx, step, psTask, workerTask); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
