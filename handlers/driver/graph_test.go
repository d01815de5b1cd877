package driver

import (
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Helpers for the hand-built partition graphs of the tests.

func typeAttr(dt wire.DataType) *tfpb.AttrValue {
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_Type{Type: tfpb.DataType(dt)}}
}

func strAttr(s string) *tfpb.AttrValue {
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_S{S: []byte(s)}}
}

func intAttr(i int64) *tfpb.AttrValue { return &tfpb.AttrValue{Value: &tfpb.AttrValue_I{I: i}} }

func boolAttr(b bool) *tfpb.AttrValue { return &tfpb.AttrValue{Value: &tfpb.AttrValue_B{B: b}} }

// recvNode is a _Recv of tensor from src (incarnation inc) on dst.
func recvNode(name, tensor, src string, inc uint64, dst string, dt wire.DataType, client bool) *tfpb.NodeDef {
	return &tfpb.NodeDef{Name: name, Op: "_Recv", Device: dst, Attr: map[string]*tfpb.AttrValue{
		"tensor_type": typeAttr(dt), "tensor_name": strAttr(tensor), "send_device": strAttr(src),
		"send_device_incarnation": intAttr(int64(inc)), "recv_device": strAttr(dst), "client_terminated": boolAttr(client),
	}}
}

// sendNode is a _Send of input from src to dst.
func sendNode(name, input, tensor, src string, inc uint64, dst string, dt wire.DataType, client bool) *tfpb.NodeDef {
	return &tfpb.NodeDef{Name: name, Op: "_Send", Input: []string{input}, Device: src, Attr: map[string]*tfpb.AttrValue{
		"T": typeAttr(dt), "tensor_name": strAttr(tensor), "send_device": strAttr(src),
		"send_device_incarnation": intAttr(int64(inc)), "recv_device": strAttr(dst), "client_terminated": boolAttr(client),
	}}
}

func identityNode(name, input string, dt wire.DataType) *tfpb.NodeDef {
	return &tfpb.NodeDef{Name: name, Op: "Identity", Input: []string{input}, Attr: map[string]*tfpb.AttrValue{"T": typeAttr(dt)}}
}

func key(src string, inc uint64, dst, tensor string) string {
	return rendezvous.CreateKey(src, inc, dst, tensor, rendezvous.FrameIter{})
}
