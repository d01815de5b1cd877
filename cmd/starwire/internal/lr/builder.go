package lr

import (
	"strconv"

	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// builder appends nodes to one partition graph placed on one device.
type builder struct {
	device string
	def    tfpb.GraphDef
}

func newBuilder(device string) *builder { return &builder{device: device} }

// attrs is a node's attributes, built with the helpers below.
type attrs map[string]*tfpb.AttrValue

// op adds a node and returns its name, the name of its output 0.
func (b *builder) op(name, op string, a attrs, inputs ...string) string {
	b.def.Node = append(b.def.Node, &tfpb.NodeDef{Name: name, Op: op, Input: inputs, Device: b.device, Attr: a})
	return name
}

func typeAttr(dt wire.DataType) *tfpb.AttrValue {
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_Type{Type: tfpb.DataType(dt)}}
}

func strAttr(s string) *tfpb.AttrValue {
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_S{S: []byte(s)}}
}

func intAttr(i int64) *tfpb.AttrValue { return &tfpb.AttrValue{Value: &tfpb.AttrValue_I{I: i}} }

func boolAttr(v bool) *tfpb.AttrValue { return &tfpb.AttrValue{Value: &tfpb.AttrValue_B{B: v}} }

func shapeAttr(dims ...int64) *tfpb.AttrValue {
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_Shape{Shape: tensor.ShapeToProto(dims)}}
}

func tensorAttr(t *tfpb.TensorProto) *tfpb.AttrValue {
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_Tensor{Tensor: t}}
}

// constInt32 adds a Const int32 vector.
func (b *builder) constInt32(name string, vals ...int32) string {
	t := &tfpb.TensorProto{Dtype: tfpb.DataType(wire.DTInt32), TensorShape: tensor.ShapeToProto([]int64{int64(len(vals))}), IntVal: vals}
	return b.op(name, "Const", attrs{"dtype": typeAttr(wire.DTInt32), "value": tensorAttr(t)})
}

// constInt32Scalar adds a Const int32 scalar.
func (b *builder) constInt32Scalar(name string, v int32) string {
	t := &tfpb.TensorProto{Dtype: tfpb.DataType(wire.DTInt32), TensorShape: &tfpb.TensorShapeProto{}, IntVal: []int32{v}}
	return b.op(name, "Const", attrs{"dtype": typeAttr(wire.DTInt32), "value": tensorAttr(t)})
}

// constInt64 adds a Const int64 scalar.
func (b *builder) constInt64(name string, v int64) string {
	t := &tfpb.TensorProto{Dtype: tfpb.DataType(wire.DTInt64), TensorShape: &tfpb.TensorShapeProto{}, Int64Val: []int64{v}}
	return b.op(name, "Const", attrs{"dtype": typeAttr(wire.DTInt64), "value": tensorAttr(t)})
}

// constFloat adds a Const float scalar.
func (b *builder) constFloat(name string, v float32) string {
	t := &tfpb.TensorProto{Dtype: tfpb.DataType(wire.DTFloat), TensorShape: &tfpb.TensorShapeProto{}, FloatVal: []float32{v}}
	return b.op(name, "Const", attrs{"dtype": typeAttr(wire.DTFloat), "value": tensorAttr(t)})
}

// fill adds a float tensor of shape dims holding v.
func (b *builder) fill(name string, v float32, dims ...int64) string {
	d := make([]int32, len(dims))
	for i, x := range dims {
		d[i] = int32(x)
	}
	shape := b.constInt32(name+"/dims", d...)
	val := b.constFloat(name+"/value", v)
	return b.op(name, "Fill", attrs{"T": typeAttr(wire.DTFloat), "index_type": typeAttr(wire.DTInt32)}, shape, val)
}

// binary adds an elementwise op of two float tensors.
func (b *builder) binary(name, op, x, y string) string {
	return b.op(name, op, attrs{"T": typeAttr(wire.DTFloat)}, x, y)
}

// unary adds an elementwise op of a float tensor.
func (b *builder) unary(name, op, x string) string {
	return b.op(name, op, attrs{"T": typeAttr(wire.DTFloat)}, x)
}

// reshape adds a Reshape of x to dims (one may be -1).
func (b *builder) reshape(name, x string, dt wire.DataType, dims ...int32) string {
	shape := b.constInt32(name+"/shape", dims...)
	return b.op(name, "Reshape", attrs{"T": typeAttr(dt), "Tshape": typeAttr(wire.DTInt32)}, x, shape)
}

// sum adds a Sum of a float tensor over axes.
func (b *builder) sum(name, x string, keepDims bool, axes ...int32) string {
	ax := b.constInt32(name+"/axes", axes...)
	return b.op(name, "Sum", attrs{"T": typeAttr(wire.DTFloat), "Tidx": typeAttr(wire.DTInt32), "keep_dims": boolAttr(keepDims)}, x, ax)
}

// A link is one end-to-end tensor transfer: a rendezvous key's parts.
type link struct {
	tensor   string // "rows:0"
	src, dst string // devices
	srcInc   uint64
}

func (l link) key() string {
	return rendezvous.CreateKey(l.src, l.srcInc, l.dst, l.tensor, rendezvous.FrameIter{})
}

func (l link) attrs(a attrs, client bool) attrs {
	a["tensor_name"] = strAttr(l.tensor)
	a["send_device"] = strAttr(l.src)
	a["send_device_incarnation"] = intAttr(int64(l.srcInc))
	a["recv_device"] = strAttr(l.dst)
	a["client_terminated"] = boolAttr(client)
	return a
}

// recv adds the _Recv end of l; client marks a feed.
func (b *builder) recv(name string, l link, dt wire.DataType, client bool) string {
	return b.op(name, "_Recv", l.attrs(attrs{"tensor_type": typeAttr(dt)}, client))
}

// send adds the _Send end of l for x; client marks a fetch.
func (b *builder) send(name, x string, l link, dt wire.DataType, client bool) string {
	return b.op(name, "_Send", l.attrs(attrs{"T": typeAttr(dt)}, client), x)
}

func itoa(i int) string { return strconv.Itoa(i) }
