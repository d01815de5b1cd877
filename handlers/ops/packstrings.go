package ops

import (
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// packStrings is Pack of string tensors, which TensorFlow 2's checkpoint
// save function uses to list its shards' prefixes for MergeV2Checkpoints.
// Strings have no fixed size, so the elements are gathered and encoded
// again instead of copied in blocks.
func packStrings(c *Context, parts []*wire.Tensor, axisAttr int64) error {
	in := parts[0].Shape
	axis, err := normAxis(axisAttr, len(in)+1)
	if err != nil {
		return err
	}
	elems := make([][][]byte, len(parts))
	for i, p := range parts {
		if !sameShape(p.Shape, in) {
			return status.Errorf(wire.InvalidArgument, "input %d has shape %v, input 0 has %v", i, p.Shape, in)
		}
		if elems[i], err = stringElems(p); err != nil {
			return err
		}
	}
	// The result is outer blocks (the dimensions before axis), each the
	// inputs' inner blocks in turn.
	outer := int64(1)
	for _, d := range in[:axis] {
		outer *= d
	}
	inner := int64(len(elems[0])) / max(outer, 1)
	all := make([][]byte, 0, len(parts)*len(elems[0]))
	for o := range outer {
		for _, e := range elems {
			all = append(all, e[o*inner:(o+1)*inner]...)
		}
	}
	shape := append(append(append([]int64(nil), in[:axis]...), int64(len(parts))), in[axis:]...)
	r, err := encodeStringTensor(shape, all)
	if err != nil {
		return err
	}
	c.setOut(0, r)
	return nil
}
