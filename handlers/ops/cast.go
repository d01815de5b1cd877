package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Cast converts between the real types and bool, as C++'s static_cast
// does in TensorFlow: floats to integers truncate toward zero, wider
// integers to narrower ones keep the low bits, anything to bool is
// whether it is non-zero, and bool is 0 or 1.

func init() {
	registerOp("Cast", &Spec{Defaults: map[string]*tfpb.AttrValue{"Truncate": boolAttr(false)}, Build: buildCast})
}

// castTypes are the types Cast converts between.
var castTypes = []wire.DataType{wire.DTFloat, wire.DTDouble, wire.DTInt32, wire.DTInt64, wire.DTInt8, wire.DTUint8, wire.DTInt16, wire.DTUint16, wire.DTBool}

func buildCast(_ *Env, n *Node) (Kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	src, err := n.attrTypeIn("SrcT", castTypes...)
	if err != nil {
		return nil, err
	}
	dst, err := n.attrTypeIn("DstT", castTypes...)
	if err != nil {
		return nil, err
	}
	n.NumOutputs = 1
	return func(c *Context) error {
		t, err := c.typed(0, src)
		if err != nil {
			return err
		}
		if src == dst {
			c.forward(0, t)
			return nil
		}
		r, err := tensor.New(dst, t.Shape)
		if err != nil {
			return err
		}
		castFrom(&r, t)
		c.setOut(0, r)
		return nil
	}, nil
}

// castFrom converts t's elements into r, of the same shape.
func castFrom(r, t *wire.Tensor) {
	switch t.DType {
	case wire.DTFloat:
		castTo(r, tensor.View[float32](t.Data))
	case wire.DTDouble:
		castTo(r, tensor.View[float64](t.Data))
	case wire.DTInt32:
		castTo(r, tensor.View[int32](t.Data))
	case wire.DTInt64:
		castTo(r, tensor.View[int64](t.Data))
	case wire.DTInt8:
		castTo(r, tensor.View[int8](t.Data))
	case wire.DTUint8, wire.DTBool:
		castTo(r, tensor.View[uint8](t.Data))
	case wire.DTInt16:
		castTo(r, tensor.View[int16](t.Data))
	case wire.DTUint16:
		castTo(r, tensor.View[uint16](t.Data))
	}
}

func castTo[S tensor.Elem](r *wire.Tensor, src []S) {
	switch r.DType {
	case wire.DTFloat:
		convert(tensor.View[float32](r.Data), src)
	case wire.DTDouble:
		convert(tensor.View[float64](r.Data), src)
	case wire.DTInt32:
		convert(tensor.View[int32](r.Data), src)
	case wire.DTInt64:
		convert(tensor.View[int64](r.Data), src)
	case wire.DTInt8:
		convert(tensor.View[int8](r.Data), src)
	case wire.DTUint8:
		convert(tensor.View[uint8](r.Data), src)
	case wire.DTInt16:
		convert(tensor.View[int16](r.Data), src)
	case wire.DTUint16:
		convert(tensor.View[uint16](r.Data), src)
	case wire.DTBool:
		dst := tensor.View[uint8](r.Data)
		for i, x := range src[:len(dst)] {
			dst[i] = 0
			if x != 0 {
				dst[i] = 1
			}
		}
	}
}

func convert[D, S tensor.Elem](dst []D, src []S) {
	src = src[:len(dst)]
	for i, x := range src {
		dst[i] = D(x)
	}
}
