package handlers

import (
	"fmt"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	registerOp("Const", &opSpec{build: buildConst})
	registerOp("Placeholder", &opSpec{defaults: map[string]*tfpb.AttrValue{"shape": unknownShapeAttr()}, build: buildNamedFeed("dtype")})
	registerOp("_Arg", &opSpec{build: buildNamedFeed("T")})
	registerOp("_Retval", &opSpec{build: buildRetval})
	registerOp("Identity", &opSpec{build: buildIdentity})
	registerOp("StopGradient", &opSpec{build: buildIdentity})
	registerOp("NoOp", &opSpec{build: buildNoOp})
	registerOp("Shape", &opSpec{defaults: map[string]*tfpb.AttrValue{"out_type": typeAttr(wire.DTInt32)}, build: buildShape})
	registerOp("Reshape", &opSpec{defaults: map[string]*tfpb.AttrValue{"Tshape": typeAttr(wire.DTInt32)}, build: buildReshape})
	registerOp("ZerosLike", &opSpec{build: buildZerosLike})
	registerOp("Fill", &opSpec{defaults: map[string]*tfpb.AttrValue{"index_type": typeAttr(wire.DTInt32)}, build: buildFill})
}

func buildConst(_ *Worker, n *node) (kernel, error) {
	if err := n.wantInputs(0); err != nil {
		return nil, err
	}
	dt, err := n.attrType("dtype")
	if err != nil {
		return nil, err
	}
	v, err := attrValue[*tfpb.AttrValue_Tensor](n, "value", "a tensor")
	if err != nil {
		return nil, err
	}
	if wire.DataType(v.Tensor.GetDtype()) != dt {
		return nil, fmt.Errorf("value is %v, dtype is %v", wire.DataType(v.Tensor.GetDtype()), dt)
	}
	t, err := TensorFromProto(v.Tensor)
	if err != nil {
		return nil, err
	}
	n.constant = ownedTensor(t.DType, t.Shape, len(t.Data))
	copy(n.constant.Data, t.Data)
	t.Buf.Release()
	n.nouts = 1
	return func(c *opCtx) error {
		c.setOut(0, c.n.constant)
		return nil
	}, nil
}

// buildNamedFeed builds Placeholder and _Arg, fed by node name.
func buildNamedFeed(typeAttrName string) func(*Worker, *node) (kernel, error) {
	return func(_ *Worker, n *node) (kernel, error) {
		if err := n.wantInputs(0); err != nil {
			return nil, err
		}
		dt, err := n.attrType(typeAttrName)
		if err != nil {
			return nil, err
		}
		n.feedType = dt
		if n.op == "Placeholder" {
			if n.feedShape, err = n.attrShape("shape"); err != nil {
				return nil, err
			}
		}
		n.nouts = 1
		return func(c *opCtx) error {
			t, ok := c.s.feeds[c.n.name]
			if !ok {
				return rpc.Errorf(wire.InvalidArgument, "%s %q was not fed", c.n.op, c.n.name)
			}
			c.forward(0, &t)
			return nil
		}, nil
	}
}

func buildRetval(_ *Worker, n *node) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	if _, err := n.attrType("T"); err != nil {
		return nil, err
	}
	return func(*opCtx) error { return nil }, nil
}

func buildIdentity(_ *Worker, n *node) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	if _, err := n.attrType("T"); err != nil {
		return nil, err
	}
	n.nouts = 1
	return func(c *opCtx) error {
		if in := c.in[0]; in.v != nil && !in.isRef {
			c.out[0] = in // a resource handle passes through as is
			return nil
		}
		t, err := c.input(0)
		if err != nil {
			return err
		}
		c.forward(0, t)
		return nil
	}, nil
}

func buildNoOp(_ *Worker, n *node) (kernel, error) {
	if err := n.wantInputs(0); err != nil {
		return nil, err
	}
	return func(*opCtx) error { return nil }, nil
}

func buildShape(_ *Worker, n *node) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	out, err := n.attrTypeIn("out_type", indexTypes...)
	if err != nil {
		return nil, err
	}
	n.nouts = 1
	return func(c *opCtx) error {
		t, err := c.input(0)
		if err != nil {
			return err
		}
		r, _ := NewTensor(out, []int64{int64(len(t.Shape))})
		for i, d := range t.Shape {
			setIndex(&r, i, d)
		}
		c.setOut(0, r)
		return nil
	}, nil
}

func buildReshape(_ *Worker, n *node) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	if _, err := n.attrType("T"); err != nil {
		return nil, err
	}
	if _, err := n.attrTypeIn("Tshape", indexTypes...); err != nil {
		return nil, err
	}
	n.nouts = 1
	return func(c *opCtx) error {
		var in [2]*wire.Tensor
		if err := c.inputs(in[:]); err != nil {
			return err
		}
		t, st := in[0], in[1]
		dims, err := indices(st)
		if err != nil || len(st.Shape) > 1 {
			return rpc.Errorf(wire.InvalidArgument, "shape must be a vector of int32 or int64, is %v%v", st.DType, st.Shape)
		}
		total, _ := t.NumElements()
		shape, err := inferShape(dims, total)
		if err != nil {
			return err
		}
		r := refTensor(*t)
		r.Shape = shape
		c.setOut(0, r)
		return nil
	}, nil
}

// inferShape fills in Reshape's one -1 dimension so that the shape holds
// total elements.
func inferShape(dims []int64, total int64) ([]int64, error) {
	shape := append([]int64(nil), dims...)
	known, unknown := int64(1), -1
	for i, d := range shape {
		switch {
		case d == -1 && unknown < 0:
			unknown = i
		case d < 0:
			return nil, rpc.Errorf(wire.InvalidArgument, "reshape to %v: bad dimension %d", dims, d)
		default:
			known *= d
		}
	}
	if unknown >= 0 {
		if known == 0 || total%known != 0 {
			return nil, rpc.Errorf(wire.InvalidArgument, "reshape %d elements to %v", total, dims)
		}
		shape[unknown] = total / known
		known = total
	}
	if known != total {
		return nil, rpc.Errorf(wire.InvalidArgument, "reshape %d elements to %v", total, dims)
	}
	return shape, nil
}

func buildZerosLike(_ *Worker, n *node) (kernel, error) {
	if _, err := n.wantSignature(1, numericTypes...); err != nil {
		return nil, err
	}
	n.nouts = 1
	return func(c *opCtx) error {
		t, err := c.input(0)
		if err != nil {
			return err
		}
		r, err := NewTensor(t.DType, t.Shape)
		if err != nil {
			return err
		}
		clear(r.Data)
		c.setOut(0, r)
		return nil
	}, nil
}

func buildFill(_ *Worker, n *node) (kernel, error) {
	if _, err := n.wantSignature(2, numericTypes...); err != nil {
		return nil, err
	}
	if _, err := n.attrTypeIn("index_type", indexTypes...); err != nil {
		return nil, err
	}
	n.nouts = 1
	return func(c *opCtx) error {
		var in [2]*wire.Tensor
		if err := c.inputs(in[:]); err != nil {
			return err
		}
		dt, v := in[0], in[1]
		dims, err := indices(dt)
		if err != nil || len(dt.Shape) != 1 {
			return rpc.Errorf(wire.InvalidArgument, "dims must be an int vector, is %v%v", dt.DType, dt.Shape)
		}
		if len(v.Shape) != 0 {
			return rpc.Errorf(wire.InvalidArgument, "value must be a scalar, has shape %v", v.Shape)
		}
		for _, d := range dims {
			if d < 0 {
				return rpc.Errorf(wire.InvalidArgument, "negative dimension in %v", dims)
			}
		}
		r, err := NewTensor(v.DType, dims)
		if err != nil {
			return err
		}
		size := v.DType.Size()
		for off := 0; off < len(r.Data); off += size {
			copy(r.Data[off:off+size], v.Data)
		}
		c.setOut(0, r)
		return nil
	}, nil
}

// indices returns an int32 or int64 tensor's elements as int64s.
func indices(t *wire.Tensor) ([]int64, error) {
	switch t.DType {
	case wire.DTInt64:
		return append([]int64(nil), View[int64](t.Data)...), nil
	case wire.DTInt32:
		v := View[int32](t.Data)
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out, nil
	}
	return nil, rpc.Errorf(wire.InvalidArgument, "indices are %v, want int32 or int64", t.DType)
}

// setIndex stores v as element i of an int32 or int64 tensor.
func setIndex(t *wire.Tensor, i int, v int64) {
	if t.DType == wire.DTInt64 {
		View[int64](t.Data)[i] = v
	} else {
		View[int32](t.Data)[i] = int32(v)
	}
}
