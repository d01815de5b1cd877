package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// ExpandDims, which a sharded Saver's graph runs on the ps to make the
// vector of checkpoint prefixes MergeV2Checkpoints takes.

func init() {
	registerOp("ExpandDims", &Spec{Defaults: map[string]*tfpb.AttrValue{"Tdim": typeAttr(wire.DTInt32)}, Build: buildExpandDims})
}

// buildExpandDims builds ExpandDims(input, axis): input with a dimension
// of 1 inserted at axis, which counts from the end when negative (-1
// appends one). The output shares the input's memory.
func buildExpandDims(_ *Env, n *Node) (Kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	if _, err := n.attrType("T"); err != nil {
		return nil, err
	}
	if _, err := n.attrTypeIn("Tdim", indexTypes...); err != nil {
		return nil, err
	}
	n.NumOutputs = 1
	return func(c *Context) error {
		var in [2]*wire.Tensor
		if err := c.inputs(in[:]); err != nil {
			return err
		}
		t, a := in[0], in[1]
		axis, err := indices(a)
		if err != nil || len(axis) != 1 {
			return status.Errorf(wire.InvalidArgument, "axis must be one int32 or int64, is %v%v", a.DType, a.Shape)
		}
		rank := int64(len(t.Shape))
		d := axis[0]
		if d < -rank-1 || d > rank {
			return status.Errorf(wire.InvalidArgument, "axis %d is out of range for a tensor of rank %d", d, rank)
		}
		if d < 0 {
			d += rank + 1
		}
		shape := make([]int64, 0, rank+1)
		shape = append(append(append(shape, t.Shape[:d]...), 1), t.Shape[d:]...)
		r := tensor.Ref(*t)
		r.Shape = shape
		c.setOut(0, r)
		return nil
	}, nil
}
