package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// Slicing: Slice (a box of begin and size) and StridedSlice (Python's
// x[begin:end:stride], with TensorFlow's masks for omitted bounds, "...",
// new axes and indexed, dropped, axes). Both move elements as bytes.

func init() {
	registerOp("Slice", &Spec{Inputs: exactly(3), Types: sliceTypes, NumOutputs: exactly(1), Build: buildSlice})
	masks := map[string]*tfpb.AttrValue{}
	for _, m := range []string{"begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"} {
		masks[m] = intAttr(0)
	}
	registerOp("StridedSlice", &Spec{Defaults: masks, Inputs: exactly(4), Types: sliceTypes, NumOutputs: exactly(1), Build: buildStridedSlice})
}

// A box is the part of a tensor a slice takes: per dimension, the first
// index, the step between indices and how many.
type box struct {
	begin, stride, size []int64
}

// take copies the box out of t into dst, in row-major order.
func (b *box) take(dst []byte, t *wire.Tensor) {
	elem := t.DType.Size()
	strides := make([]int64, len(t.Shape)) // in elements
	s := int64(1)
	for d := len(t.Shape) - 1; d >= 0; d-- {
		strides[d] = s
		s *= t.Shape[d]
	}
	var walk func(d int, off int64)
	walk = func(d int, off int64) {
		if d == len(t.Shape) {
			dst = dst[copy(dst, t.Data[off*int64(elem):(off+1)*int64(elem)]):]
			return
		}
		start := off + b.begin[d]*strides[d]
		if d == len(t.Shape)-1 && b.stride[d] == 1 {
			n := b.size[d] * int64(elem)
			dst = dst[copy(dst, t.Data[start*int64(elem):start*int64(elem)+n]):]
			return
		}
		for i := range b.size[d] {
			walk(d+1, start+i*b.stride[d]*strides[d])
		}
	}
	if n, _ := tensor.NumElements(b.size); n > 0 {
		walk(0, 0)
	}
}

// sliceTypes are the type attributes of Slice and StridedSlice: the
// elements, moved as bytes, and the begin, end (or size) and strides.
var sliceTypes = []TypeAttr{fixedSize("T"), typeIn("Index", indexTypes...)}

func buildSlice(_ *Env, n *Node) (Kernel, error) {
	dt := n.typeOf("T")
	return func(c *Context) error {
		t, err := c.typed(0, dt)
		if err != nil {
			return err
		}
		begin, err := c.indexVector(1, "begin", len(t.Shape))
		if err != nil {
			return err
		}
		size, err := c.indexVector(2, "size", len(t.Shape))
		if err != nil {
			return err
		}
		b := box{begin: begin, size: size, stride: make([]int64, len(t.Shape))}
		for d, dim := range t.Shape {
			b.stride[d] = 1
			if size[d] == -1 {
				size[d] = dim - begin[d]
			}
			if begin[d] < 0 || size[d] < 0 || begin[d]+size[d] > dim {
				return status.Errorf(wire.InvalidArgument, "slice of begin %v and size %v is outside shape %v in dimension %d", begin, size, t.Shape, d)
			}
		}
		r, err := tensor.New(dt, size)
		if err != nil {
			return err
		}
		b.take(r.Data, t)
		c.setOut(0, r)
		return nil
	}, nil
}

// indexVector reads input i, an int vector called name, of length n (any
// length when n < 0).
func (c *Context) indexVector(i int, name string, n int) ([]int64, error) {
	t, err := c.input(i)
	if err != nil {
		return nil, err
	}
	v, err := indices(t)
	if err != nil || len(t.Shape) != 1 || (n >= 0 && len(v) != n) {
		return nil, errOr(err, "%s must be an int vector of length %d, is %v%v", name, n, t.DType, t.Shape)
	}
	return v, nil
}

// stridedSpec is StridedSlice's request: begin, end and strides with the
// masks, one bit per entry.
type stridedSpec struct {
	begin, end, strides                   []int64
	beginMask, endMask, ellipsis, newAxis int64
	shrink                                int64
}

// Entries of finalShape that are not dense dimensions.
const (
	newAxisDim = -1
	shrinkDim  = -2
)

// resolve turns the request into a box over shape and the output's shape,
// as TensorFlow's ValidateStridedSliceOp does: an ellipsis (or, without
// one, the end of the spec) stands for every dimension not named, a new
// axis adds a dimension of 1, a shrunk axis takes one index and drops the
// dimension, a masked bound is the whole extent in the stride's direction,
// and bounds are clamped to the dimension.
func (s *stridedSpec) resolve(shape []int64) (box, []int64, error) {
	n := len(s.begin)
	ellipsis := s.ellipsis
	if ellipsis&(1<<n-1) == 0 {
		ellipsis |= 1 << n // an implicit ellipsis at the end
		n++
	}
	if ellipsis&(ellipsis-1) != 0 {
		return box{}, nil, status.Errorf(wire.InvalidArgument, "more than one ellipsis in the mask %#b", s.ellipsis)
	}
	rank := len(shape)
	b := box{begin: make([]int64, rank), stride: make([]int64, rank), size: make([]int64, rank)}
	// gather lists, per output dimension, the dense dimension it comes
	// from (or newAxisDim); shrunk dimensions are recorded in shrunk.
	var gather []int
	shrunk := make([]bool, rank)
	full := 0
	for i := range n {
		bit := int64(1) << i
		switch {
		case ellipsis&bit != 0:
			newAfter := 0
			for j := i + 1; j < len(s.begin); j++ {
				if s.newAxis&(1<<j) != 0 && ellipsis&(1<<j) == 0 {
					newAfter++
				}
			}
			next := min(rank-(n-i)+1+newAfter, rank)
			for ; full < next; full++ {
				b.begin[full], b.stride[full], b.size[full] = 0, 1, shape[full]
				gather = append(gather, full)
			}
		case s.newAxis&bit != 0:
			gather = append(gather, newAxisDim)
		default:
			if full >= rank {
				return box{}, nil, status.Errorf(wire.InvalidArgument, "slice index %d is beyond the input's rank %d", i, rank)
			}
			if err := s.dense(&b, full, i, shape[full]); err != nil {
				return box{}, nil, err
			}
			if s.shrink&bit != 0 {
				shrunk[full] = true
			} else {
				gather = append(gather, full)
			}
			full++
		}
	}
	var out []int64
	for _, g := range gather {
		if g == newAxisDim {
			out = append(out, 1)
		} else {
			out = append(out, b.size[g])
		}
	}
	if out == nil {
		out = []int64{}
	}
	return b, out, nil
}

// dense resolves spec entry i for dense dimension d of extent dim.
func (s *stridedSpec) dense(b *box, d, i int, dim int64) error {
	bit := int64(1) << i
	stride := s.strides[i]
	if stride == 0 {
		return status.Errorf(wire.InvalidArgument, "strides[%d] is 0", i)
	}
	b.stride[d] = stride
	if s.shrink&bit != 0 {
		x := s.begin[i]
		if x < 0 {
			x += dim
		}
		if x < 0 || x >= dim {
			return status.Errorf(wire.InvalidArgument, "slice index %d of dimension %d is out of bounds for size %d", s.begin[i], d, dim)
		}
		if stride < 0 {
			return status.Errorf(wire.InvalidArgument, "only stride 1 is allowed on an indexed dimension, strides[%d] is %d", i, stride)
		}
		b.begin[d], b.size[d] = x, 1
		return nil
	}
	lo, hi := int64(0), dim // the valid range of indices for the stride
	if stride < 0 {
		lo, hi = -1, dim-1
	}
	bound := func(x int64, masked, isEnd bool) int64 {
		if masked {
			if (stride > 0) == isEnd {
				return hi
			}
			return lo
		}
		if x < 0 {
			x += dim
		}
		return min(max(x, lo), hi)
	}
	begin := bound(s.begin[i], s.beginMask&bit != 0, false)
	end := bound(s.end[i], s.endMask&bit != 0, true)
	size := int64(0)
	if stride > 0 && end > begin {
		size = (end - begin + stride - 1) / stride
	} else if stride < 0 && end < begin {
		size = (begin - end - stride - 1) / -stride
	}
	b.begin[d], b.size[d] = begin, size
	return nil
}

func buildStridedSlice(_ *Env, n *Node) (Kernel, error) {
	dt := n.typeOf("T")
	var spec stridedSpec
	var err error
	for _, m := range []struct {
		name string
		dst  *int64
	}{{"begin_mask", &spec.beginMask}, {"end_mask", &spec.endMask}, {"ellipsis_mask", &spec.ellipsis}, {"new_axis_mask", &spec.newAxis}, {"shrink_axis_mask", &spec.shrink}} {
		if *m.dst, err = n.attrInt(m.name); err != nil {
			return nil, err
		}
	}
	return func(c *Context) error {
		t, err := c.typed(0, dt)
		if err != nil {
			return err
		}
		s := spec
		if s.begin, err = c.indexVector(1, "begin", -1); err != nil {
			return err
		}
		if s.end, err = c.indexVector(2, "end", len(s.begin)); err != nil {
			return err
		}
		if s.strides, err = c.indexVector(3, "strides", len(s.begin)); err != nil {
			return err
		}
		if len(s.begin) > 32 {
			return status.Errorf(wire.InvalidArgument, "%d slice indices, at most 32", len(s.begin))
		}
		b, shape, err := s.resolve(t.Shape)
		if err != nil {
			return err
		}
		r, err := tensor.New(dt, shape)
		if err != nil {
			return err
		}
		b.take(r.Data, t)
		c.setOut(0, r)
		return nil
	}, nil
}
