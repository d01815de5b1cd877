package handlers_test

import (
	"context"
	"fmt"
	"time"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// A worker served over starwire runs a partition fed and fetched the way a
// TensorFlow master does it: through client-terminated _Recv and _Send
// nodes, with the tensors as raw segments.
func Example() {
	w, err := handlers.NewWorker(handlers.Options{Job: "worker", Incarnation: 1})
	if err != nil {
		panic(err)
	}
	srv := rpc.NewServer()
	w.Register(srv)
	l, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	wc := handlers.NewStarCaller(w.Task(), rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: &tcp.Transport{}}))
	defer wc.Close()

	const master = "/job:localhost/replica:0/task:0/device:CPU:0"
	dev := w.Device()
	strAttr := func(s string) *tfpb.AttrValue { return &tfpb.AttrValue{Value: &tfpb.AttrValue_S{S: []byte(s)}} }
	typeAttr := func(t tfpb.DataType) *tfpb.AttrValue { return &tfpb.AttrValue{Value: &tfpb.AttrValue_Type{Type: t}} }
	intAttr := func(i int64) *tfpb.AttrValue { return &tfpb.AttrValue{Value: &tfpb.AttrValue_I{I: i}} }
	yes := &tfpb.AttrValue{Value: &tfpb.AttrValue_B{B: true}}
	graph := &tfpb.GraphDef{Node: []*tfpb.NodeDef{
		{Name: "x", Op: "_Recv", Attr: map[string]*tfpb.AttrValue{
			"tensor_type": typeAttr(tfpb.DataType_DT_FLOAT), "tensor_name": strAttr("x:0"), "send_device": strAttr(master),
			"send_device_incarnation": intAttr(1), "recv_device": strAttr(dev), "client_terminated": yes}},
		{Name: "y", Op: "Sigmoid", Input: []string{"x"}, Attr: map[string]*tfpb.AttrValue{"T": typeAttr(tfpb.DataType_DT_FLOAT)}},
		{Name: "y/_send", Op: "_Send", Input: []string{"y"}, Attr: map[string]*tfpb.AttrValue{
			"T": typeAttr(tfpb.DataType_DT_FLOAT), "tensor_name": strAttr("y:0"), "send_device": strAttr(dev),
			"send_device_incarnation": intAttr(int64(w.Incarnation())), "recv_device": strAttr(master), "client_terminated": yes}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := wc.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: graph})
	if err != nil {
		panic(err)
	}

	x, _ := tensor.New(wire.DTFloat, []int64{3})
	defer x.Buf.Release()
	copy(tensor.View[float32](x.Data), []float32{-2, 0, 2})
	feed := rendezvous.CreateKey(master, 1, dev, "x:0", rendezvous.FrameIter{})
	fetch := rendezvous.CreateKey(dev, w.Incarnation(), master, "y:0", rendezvous.FrameIter{})
	var out handlers.Fetched
	defer out.Release()
	err = wc.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 1, RecvKey: []string{fetch}},
		[]handlers.Feed{{Key: feed, Tensor: x}}, &out)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%.3f\n", tensor.View[float32](out.Tensors[0].Data))
	if err := wc.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: 1}); err != nil {
		panic(err)
	}
	// Output: [0.119 0.500 0.881]
}
