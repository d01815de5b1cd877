package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/starwire/starwire/wire/tfpb"
)

// BenchmarkControlCall measures a control call with protobuf metadata and no
// tensors (a RecvTensorRequest in, a RecvTensorResponse out): starwire
// through the rpc proto helpers, and gRPC-Go for comparison. Client and
// server share this process, so allocs/op counts both ends.
func BenchmarkControlCall(b *testing.B) {
	s := startLoopback(b)
	var figs figures
	b.Run("starwire", func(b *testing.B) {
		c := NewStarwireClient(newRPCClient(b, s.Addrs.Starwire))
		figs.set("starwire", benchControl(b, c.Control))
	})
	b.Run("grpc", func(b *testing.B) {
		figs.set("grpc", benchControl(b, newGRPCClient(b, s.Addrs.GRPC).Control))
	})
	logTargets([]target{
		{name: "control call: starwire allocs (both ends)", measured: figs.field("starwire", allocsOf), want: 4, atMost: true, unit: "allocs"},
	})
}

// controlRequest is a RecvTensor request as TensorFlow makes them.
func controlRequest() *tfpb.RecvTensorRequest {
	return &tfpb.RecvTensorRequest{
		StepId:        12345,
		RendezvousKey: "/job:worker/replica:0/task:0/device:CPU:0;0000000000000001;/job:ps/replica:0/task:0/device:CPU:0;edge_7_w;0:0",
		DmaOk:         true,
		RequestId:     99,
	}
}

type controlFunc func(context.Context, *tfpb.RecvTensorRequest, *tfpb.RecvTensorResponse) error

func benchControl(b *testing.B, call controlFunc) figure {
	req, resp := controlRequest(), new(tfpb.RecvTensorResponse)
	ctx := context.Background()
	return runCalls(b, 1, warmCalls, func() func() error {
		return func() error {
			if err := call(ctx, req, resp); err != nil {
				return err
			}
			if resp.SendStartMicros != req.StepId {
				return fmt.Errorf("control call answered %v", resp)
			}
			return nil
		}
	})
}
