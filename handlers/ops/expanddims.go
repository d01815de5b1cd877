package ops

import (
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// ExpandDims, which a sharded Saver's graph runs on the ps to make the
// vector of checkpoint prefixes MergeV2Checkpoints takes.

func init() {
	registerOp("ExpandDims", &Spec{Defaults: map[string]*tfpb.AttrValue{"Tdim": typeAttr(wire.DTInt32)},
		Inputs: exactly(2), Types: []TypeAttr{anyType("T"), typeIn("Tdim", indexTypes...)}, NumOutputs: exactly(1), Build: buildExpandDims})
}

// buildExpandDims builds ExpandDims(input, axis): input with a dimension
// of 1 inserted at axis, which counts from the end when negative (-1
// appends one). The output shares the input's memory.
func buildExpandDims(*Env, *Node) (Kernel, error) {
	return reshapeKernel(expandedShape), nil
}

// expandedShape is t's shape with a 1 inserted at the axis a holds.
func expandedShape(t, a *wire.Tensor) ([]int64, error) {
	axis, err := indices(a)
	if err != nil || len(axis) != 1 {
		return nil, status.Errorf(wire.InvalidArgument, "axis must be one int32 or int64, is %v%v", a.DType, a.Shape)
	}
	rank := int64(len(t.Shape))
	d := axis[0]
	if d < -rank-1 || d > rank {
		return nil, status.Errorf(wire.InvalidArgument, "axis %d is out of range for a tensor of rank %d", d, rank)
	}
	if d < 0 {
		d += rank + 1
	}
	shape := make([]int64, 0, rank+1)
	return append(append(append(shape, t.Shape[:d]...), 1), t.Shape[d:]...), nil
}
