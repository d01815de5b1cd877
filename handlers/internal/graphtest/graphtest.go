// Package graphtest builds the GraphDefs and tensors the worker's tests run:
// nodes with their attributes, feeds and fetches keyed as TensorFlow's
// master keys them, and small tensors to feed and compare. It is for tests
// only; tensors it returns own a pooled reference the test releases.
package graphtest

import (
	"time"

	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// NodeDef returns a node of op named name.
func NodeDef(name, op string, inputs []string, attrs map[string]*tfpb.AttrValue) *tfpb.NodeDef {
	return &tfpb.NodeDef{Name: name, Op: op, Input: inputs, Attr: attrs}
}

// In lists a node's inputs.
func In(names ...string) []string { return names }

// Attrs builds attributes from name, value pairs; a value is a
// wire.DataType, bool, int, int64, string, []int64 (a shape),
// [][]int64 (a list of shapes), []wire.DataType or *tfpb.TensorProto.
func Attrs(kv ...any) map[string]*tfpb.AttrValue {
	m := make(map[string]*tfpb.AttrValue)
	for i := 0; i < len(kv); i += 2 {
		var a *tfpb.AttrValue
		switch v := kv[i+1].(type) {
		case wire.DataType:
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_Type{Type: tfpb.DataType(v)}}
		case bool:
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_B{B: v}}
		case int:
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_I{I: int64(v)}}
		case int64:
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_I{I: v}}
		case float32:
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_F{F: v}}
		case string:
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_S{S: []byte(v)}}
		case []int64:
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_Shape{Shape: tensor.ShapeToProto(v)}}
		case [][]int64:
			l := &tfpb.AttrValue_ListValue{}
			for _, s := range v {
				l.Shape = append(l.Shape, tensor.ShapeToProto(s))
			}
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_List{List: l}}
		case []wire.DataType:
			l := &tfpb.AttrValue_ListValue{}
			for _, d := range v {
				l.Type = append(l.Type, tfpb.DataType(d))
			}
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_List{List: l}}
		case *tfpb.TensorProto:
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_Tensor{Tensor: v}}
		default:
			panic("graphtest: unsupported attribute value")
		}
		m[kv[i].(string)] = a
	}
	return m
}

// ConstF32 is a Const of floats.
func ConstF32(name string, shape []int64, vals ...float32) *tfpb.NodeDef {
	return NodeDef(name, "Const", nil, Attrs("dtype", wire.DTFloat, "value",
		&tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: tensor.ShapeToProto(shape), FloatVal: vals}))
}

// ConstI64 is a Const of int64s.
func ConstI64(name string, shape []int64, vals ...int64) *tfpb.NodeDef {
	return NodeDef(name, "Const", nil, Attrs("dtype", wire.DTInt64, "value",
		&tfpb.TensorProto{Dtype: tfpb.DataType_DT_INT64, TensorShape: tensor.ShapeToProto(shape), Int64Val: vals}))
}

// ConstI32 is a Const of int32s.
func ConstI32(name string, shape []int64, vals ...int32) *tfpb.NodeDef {
	return NodeDef(name, "Const", nil, Attrs("dtype", wire.DTInt32, "value",
		&tfpb.TensorProto{Dtype: tfpb.DataType_DT_INT32, TensorShape: tensor.ShapeToProto(shape), IntVal: vals}))
}

// ConstStr is a Const of strings.
func ConstStr(name string, shape []int64, vals ...string) *tfpb.NodeDef {
	p := &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: tensor.ShapeToProto(shape)}
	for _, v := range vals {
		p.StringVal = append(p.StringVal, []byte(v))
	}
	return NodeDef(name, "Const", nil, Attrs("dtype", wire.DTString, "value", p))
}

// ClientDevice is the device of the RunGraph caller in client-terminated
// keys, as TensorFlow's master names it.
const ClientDevice = "/job:localhost/replica:0/task:0/device:CPU:0"

// FeedNode is a client-terminated _Recv on dst; FeedKey is the key that
// feeds it.
func FeedNode(name, tensorName string, dt wire.DataType, dst string) *tfpb.NodeDef {
	return NodeDef(name, "_Recv", nil, Attrs("tensor_type", dt, "tensor_name", tensorName, "send_device", ClientDevice,
		"send_device_incarnation", int64(1), "recv_device", dst, "client_terminated", true))
}

// FeedKey is the rendezvous key of FeedNode(_, tensorName, _, dst).
func FeedKey(tensorName, dst string) string {
	return rendezvous.CreateKey(ClientDevice, 1, dst, tensorName, rendezvous.FrameIter{})
}

// FetchNode is a client-terminated _Send of input on src; FetchKey is the
// recv_key that fetches it.
func FetchNode(name, input, tensorName string, dt wire.DataType, src string, inc uint64) *tfpb.NodeDef {
	return NodeDef(name, "_Send", In(input), Attrs("T", dt, "tensor_name", tensorName, "send_device", src,
		"send_device_incarnation", int64(inc), "recv_device", ClientDevice, "client_terminated", true))
}

// FetchKey is the rendezvous key of FetchNode(_, _, tensorName, _, src, inc).
func FetchKey(tensorName, src string, inc uint64) string {
	return rendezvous.CreateKey(src, inc, ClientDevice, tensorName, rendezvous.FrameIter{})
}

// SendNode and RecvNode move a tensor from src's partition to dst's.
func SendNode(name, input, tensorName string, dt wire.DataType, src string, inc uint64, dst string) *tfpb.NodeDef {
	return NodeDef(name, "_Send", In(input), Attrs("T", dt, "tensor_name", tensorName, "send_device", src,
		"send_device_incarnation", int64(inc), "recv_device", dst))
}

// RecvNode is the receiving end of SendNode.
func RecvNode(name, tensorName string, dt wire.DataType, src string, inc uint64, dst string) *tfpb.NodeDef {
	return NodeDef(name, "_Recv", nil, Attrs("tensor_type", dt, "tensor_name", tensorName, "send_device", src,
		"send_device_incarnation", int64(inc), "recv_device", dst))
}

// GraphDef is a graph of nodes.
func GraphDef(nodes ...*tfpb.NodeDef) *tfpb.GraphDef { return &tfpb.GraphDef{Node: nodes} }

// F32 returns a float tensor, which the test releases.
func F32(shape []int64, vals ...float32) wire.Tensor { return Of(wire.DTFloat, shape, vals) }

// I64 returns an int64 tensor, which the test releases.
func I64(shape []int64, vals ...int64) wire.Tensor { return Of(wire.DTInt64, shape, vals) }

// Of returns a tensor of dt, whose elements are of type T, holding vals
// (zeros after them).
func Of[T tensor.Elem](dt wire.DataType, shape []int64, vals []T) wire.Tensor {
	t, err := tensor.New(dt, shape)
	if err != nil {
		panic(err)
	}
	clear(t.Data)
	copy(tensor.View[T](t.Data), vals)
	return t
}

// Floats returns a copy of a float tensor's elements.
func Floats(t *wire.Tensor) []float32 { return append([]float32(nil), tensor.View[float32](t.Data)...) }

// ApproxEqual reports whether a and b are equal within 1e-4.
func ApproxEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		d := a[i] - b[i]
		if d < -1e-4 || d > 1e-4 {
			return false
		}
	}
	return true
}

// Settle bounds the tests' waits (testwait.Eventually) for a state
// another goroutine brings about (a receiver waiting, buffers back in
// their pool): far past what an idle machine needs, so that it fails only
// when the state never comes.
const Settle = 10 * time.Second
