package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// Joining and splitting tensors along an axis: ConcatV2, Pack, Unpack.
// They move elements as bytes, so they take any fixed-size dtype.

func init() {
	registerOp("ConcatV2", &Spec{Defaults: map[string]*tfpb.AttrValue{"Tidx": typeAttr(wire.DTInt32)},
		Inputs: byInt("N", 1).plus(1), Types: []TypeAttr{fixedSize("T"), typeIn("Tidx", indexTypes...)}, NumOutputs: exactly(1), Build: buildConcat})
	registerOp("Pack", &Spec{Defaults: map[string]*tfpb.AttrValue{"axis": intAttr(0)}, Inputs: byInt("N", 1), Types: []TypeAttr{storable("T")}, NumOutputs: exactly(1), Build: buildPack})
	registerOp("Unpack", &Spec{Defaults: map[string]*tfpb.AttrValue{"axis": intAttr(0)},
		Inputs: exactly(1), Types: []TypeAttr{fixedSize("T")}, NumOutputs: byInt("num", 0), Build: buildUnpack})
}

// normAxis maps axis in [-rank, rank) to [0, rank).
func normAxis(axis int64, rank int) (int, error) {
	if axis < -int64(rank) || axis >= int64(rank) {
		return 0, status.Errorf(wire.InvalidArgument, "axis %d is out of range for rank %d", axis, rank)
	}
	if axis < 0 {
		axis += int64(rank)
	}
	return int(axis), nil
}

// blocks describes t as outer blocks of inner bytes around axis: the
// dimensions before axis make the blocks, axis and those after it a block.
func blocks(t *wire.Tensor, axis int) (outer, inner int) {
	outer, inner = 1, t.DType.Size()
	for _, d := range t.Shape[:axis] {
		outer *= int(d)
	}
	for _, d := range t.Shape[axis:] {
		inner *= int(d)
	}
	return outer, inner
}

// joinAlong lays the parts' blocks side by side into r: block o of r is
// block o of every part, in order.
func joinAlong(r *wire.Tensor, parts []*wire.Tensor, axis int) {
	dst := r.Data
	outer, _ := blocks(parts[0], axis)
	for o := range outer {
		for _, p := range parts {
			_, inner := blocks(p, axis)
			dst = dst[copy(dst, p.Data[o*inner:(o+1)*inner]):]
		}
	}
}

func buildConcat(_ *Env, n *Node) (Kernel, error) {
	num, dt := n.intOf("N"), n.typeOf("T")
	return func(c *Context) error {
		parts := make([]*wire.Tensor, num)
		if err := c.typedInputs(dt, parts); err != nil {
			return err
		}
		at, err := c.input(int(num))
		if err != nil {
			return err
		}
		ax, err := indices(at)
		if err != nil || len(at.Shape) != 0 {
			return errOr(err, "axis must be an int scalar, is %v%v", at.DType, at.Shape)
		}
		rank := len(parts[0].Shape)
		if rank == 0 {
			return status.Errorf(wire.InvalidArgument, "cannot concatenate scalars (use Pack)")
		}
		axis, err := normAxis(ax[0], rank)
		if err != nil {
			return err
		}
		shape := append([]int64(nil), parts[0].Shape...)
		for i, p := range parts[1:] {
			if len(p.Shape) != rank {
				return status.Errorf(wire.InvalidArgument, "input %d has rank %d, input 0 has rank %d", i+1, len(p.Shape), rank)
			}
			for d := range rank {
				if d != axis && p.Shape[d] != shape[d] {
					return status.Errorf(wire.InvalidArgument, "input %d has shape %v, input 0 has %v: they differ outside axis %d", i+1, p.Shape, parts[0].Shape, axis)
				}
			}
			shape[axis] += p.Shape[axis]
		}
		r, err := tensor.New(dt, shape)
		if err != nil {
			return err
		}
		joinAlong(&r, parts, axis)
		c.setOut(0, r)
		return nil
	}, nil
}

// buildPack builds Pack: N tensors of one shape stacked along a new axis.
func buildPack(_ *Env, n *Node) (Kernel, error) {
	num, dt := n.intOf("N"), n.typeOf("T")
	axisAttr, err := n.attrInt("axis")
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		parts := make([]*wire.Tensor, num)
		if err := c.typedInputs(dt, parts); err != nil {
			return err
		}
		if dt == wire.DTString {
			return packStrings(c, parts, axisAttr)
		}
		in := parts[0].Shape
		axis, err := normAxis(axisAttr, len(in)+1)
		if err != nil {
			return err
		}
		for i, p := range parts[1:] {
			if !sameShape(p.Shape, in) {
				return status.Errorf(wire.InvalidArgument, "input %d has shape %v, input 0 has %v", i+1, p.Shape, in)
			}
		}
		// Each part is the output's slice at one index of the new axis:
		// view it with a 1 there and join along it.
		shape := append(append(append([]int64(nil), in[:axis]...), num), in[axis:]...)
		r, err := tensor.New(dt, shape)
		if err != nil {
			return err
		}
		views := make([]*wire.Tensor, num)
		for i, p := range parts {
			views[i] = &wire.Tensor{DType: dt, Data: p.Data, Shape: append(append(append([]int64(nil), in[:axis]...), 1), in[axis:]...)}
		}
		joinAlong(&r, views, axis)
		c.setOut(0, r)
		return nil
	}, nil
}

// buildUnpack builds Unpack: a tensor split along axis into num tensors
// without that axis.
func buildUnpack(_ *Env, n *Node) (Kernel, error) {
	num, dt := n.intOf("num"), n.typeOf("T")
	axisAttr, err := n.attrInt("axis")
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		t, err := c.typed(0, dt)
		if err != nil {
			return err
		}
		axis, err := normAxis(axisAttr, len(t.Shape))
		if err != nil {
			return err
		}
		if t.Shape[axis] != num {
			return status.Errorf(wire.InvalidArgument, "input has %d along axis %d, num is %d", t.Shape[axis], axis, num)
		}
		shape := append(append([]int64(nil), t.Shape[:axis]...), t.Shape[axis+1:]...)
		outer, inner := blocks(t, axis)
		part := inner / max(int(num), 1)
		for i := range int(num) {
			r, err := tensor.New(dt, shape)
			if err != nil {
				return err
			}
			dst := r.Data
			for o := range outer {
				dst = dst[copy(dst, t.Data[o*inner+i*part:o*inner+(i+1)*part]):]
			}
			c.setOut(i, r)
		}
		return nil
	}, nil
}
