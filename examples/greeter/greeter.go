package main

import (
	"context"
	"encoding/binary"
	"math"

	"github.com/starwire/starwire/examples/greeter/greeterpb"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// greeter implements greeterpb.GreeterStarwireServer.
type greeter struct{}

func (greeter) SayHello(ctx context.Context, req *greeterpb.HelloRequest) (*greeterpb.HelloReply, error) {
	return &greeterpb.HelloReply{Message: "hello, " + req.GetName()}, nil
}

// Scale answers with a new tensor: the request's memory goes back to its
// pool once the answer is sent.
func (greeter) Scale(ctx context.Context, req *greeterpb.ScaleRequest, in *wire.Inbound, out *rpc.Response) (*greeterpb.ScaleReply, error) {
	if len(in.Tensors) != 1 || in.Tensors[0].DType != wire.DTFloat {
		return nil, rpc.Errorf(wire.InvalidArgument, "Scale: want one float tensor, got %d", len(in.Tensors))
	}
	t := in.Tensors[0]
	data := make([]byte, len(t.Data))
	for i := 0; i+4 <= len(data); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(t.Data[i:]))
		binary.LittleEndian.PutUint32(data[i:], math.Float32bits(v*req.GetFactor()))
	}
	out.Tensors = append(out.Tensors, wire.Tensor{DType: wire.DTFloat, Shape: t.Shape, Data: data})
	return &greeterpb.ScaleReply{Elements: int64(len(data) / 4)}, nil
}
