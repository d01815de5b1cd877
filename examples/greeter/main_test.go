package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/starwire/starwire/examples/greeter/greeterpb"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	want := "call /greeter.Greeter/SayHello over tcp: ok\nhello, starwire\n"
	if out.String() != want {
		t.Fatalf("output %q, want %q", out.String(), want)
	}
}

// TestScale calls the tensor method through the generated stubs: the
// vector goes out as a raw segment and comes back scaled, and a request
// without a tensor fails with the server's status.
func TestScale(t *testing.T) {
	srv := rpc.NewServer()
	greeterpb.RegisterGreeterStarwireServer(srv, greeter{}, nil)
	l, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	c := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: &tcp.Transport{}})
	defer c.Close()
	client := greeterpb.NewGreeterStarwireClient(c)

	const n = 1000
	data := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(i)))
	}
	var reply rpc.Reply
	defer reply.Release()
	resp, err := client.Scale(context.Background(), &greeterpb.ScaleRequest{Factor: 0.5},
		[]wire.Tensor{{DType: wire.DTFloat, Shape: []int64{n}, Data: data}}, &reply)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetElements() != n || len(reply.Tensors) != 1 || len(reply.Tensors[0].Data) != 4*n {
		t.Fatalf("resp %v with %d tensors", resp, len(reply.Tensors))
	}
	for i := range n {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(reply.Tensors[0].Data[4*i:])); got != float32(i)/2 {
			t.Fatalf("element %d = %v, want %v", i, got, float32(i)/2)
		}
	}
	if _, err := client.Scale(context.Background(), &greeterpb.ScaleRequest{Factor: 2}, nil, &reply); rpc.CodeOf(err) != wire.InvalidArgument {
		t.Fatalf("Scale without a tensor: %v, want InvalidArgument", err)
	}
}
