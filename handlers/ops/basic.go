package ops

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	one := exactly(1)
	registerOp("Const", &Spec{Inputs: exactly(0), Types: []TypeAttr{anyType("dtype")}, NumOutputs: one, Build: buildConst})
	registerOp("Placeholder", &Spec{Defaults: map[string]*tfpb.AttrValue{"shape": unknownShapeAttr()},
		Inputs: exactly(0), Types: []TypeAttr{anyType("dtype")}, NumOutputs: one, Build: buildNamedFeed("dtype")})
	registerOp("_Arg", &Spec{Inputs: exactly(0), Types: []TypeAttr{anyType("T")}, NumOutputs: one, Build: buildNamedFeed("T")})
	registerOp("_Retval", &Spec{Inputs: one, Types: []TypeAttr{anyType("T")}, NumOutputs: exactly(0), Build: buildNoOp})
	registerOp("Identity", &Spec{Inputs: one, Types: []TypeAttr{anyType("T")}, NumOutputs: one, Build: buildIdentity})
	registerOp("StopGradient", &Spec{Inputs: one, Types: []TypeAttr{anyType("T")}, NumOutputs: one, Build: buildIdentity})
	registerOp("NoOp", &Spec{Inputs: exactly(0), NumOutputs: exactly(0), Build: buildNoOp})
	registerOp("Shape", &Spec{Defaults: map[string]*tfpb.AttrValue{"out_type": typeAttr(wire.DTInt32)},
		Inputs: one, Types: []TypeAttr{typeIn("out_type", indexTypes...)}, NumOutputs: one, Build: buildShape})
	registerOp("Reshape", &Spec{Defaults: map[string]*tfpb.AttrValue{"Tshape": typeAttr(wire.DTInt32)},
		Inputs: exactly(2), Types: []TypeAttr{anyType("T"), typeIn("Tshape", indexTypes...)}, NumOutputs: one, Build: buildReshape})
	registerOp("ZerosLike", &Spec{Inputs: one, Types: []TypeAttr{typeIn("T", numericTypes...)}, NumOutputs: one, Build: buildZerosLike})
	registerOp("Fill", &Spec{Defaults: map[string]*tfpb.AttrValue{"index_type": typeAttr(wire.DTInt32)},
		Inputs: exactly(2), Types: []TypeAttr{typeIn("T", numericTypes...), typeIn("index_type", indexTypes...)}, NumOutputs: one, Build: buildFill})
	registerOp("IdentityN", &Spec{Inputs: byList("T"), NumOutputs: byList("T"), Build: buildIdentityN})
	registerOp("Size", &Spec{Defaults: map[string]*tfpb.AttrValue{"out_type": typeAttr(wire.DTInt32)},
		Inputs: one, Types: []TypeAttr{typeIn("out_type", indexTypes...)}, NumOutputs: one, Build: buildSize})
	registerOp("Range", &Spec{Defaults: map[string]*tfpb.AttrValue{"Tidx": typeAttr(wire.DTInt32)},
		Inputs: exactly(3), Types: []TypeAttr{rangeByDType.attr("Tidx")}, NumOutputs: one, Build: buildRange})
}

func buildConst(_ *Env, n *Node) (Kernel, error) {
	dt := n.typeOf("dtype")
	v, err := attrValue[*tfpb.AttrValue_Tensor](n, "value", "a tensor")
	if err != nil {
		return nil, err
	}
	if wire.DataType(v.Tensor.GetDtype()) != dt {
		return nil, fmt.Errorf("value is %v, dtype is %v", wire.DataType(v.Tensor.GetDtype()), dt)
	}
	t, err := tensor.FromProto(v.Tensor)
	if err != nil {
		return nil, err
	}
	// The value lives in memory the graph owns (Buf is nil): steps output
	// views of it, which the garbage collector keeps alive.
	constant := tensor.Owned(t.DType, t.Shape, len(t.Data))
	copy(constant.Data, t.Data)
	t.Buf.Release()
	return func(c *Context) error {
		c.setOut(0, constant)
		return nil
	}, nil
}

// buildNamedFeed builds Placeholder and _Arg, fed by node name.
func buildNamedFeed(typeAttrName string) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		n.FeedType = n.typeOf(typeAttrName)
		if n.Op == "Placeholder" {
			var err error
			if n.FeedShape, err = n.attrShape("shape"); err != nil {
				return nil, err
			}
		}
		return func(c *Context) error {
			t, ok := c.Feeds[n.Name]
			if !ok {
				return status.Errorf(wire.InvalidArgument, "%s %q was not fed", n.Op, n.Name)
			}
			c.forward(0, &t)
			return nil
		}, nil
	}
}

func buildIdentity(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		if in := c.In[0]; in.v != nil && !in.isRef {
			c.Out[0] = in // a resource handle passes through as is
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

// buildNoOp builds NoOp, and _Retval, which the executor reads its input
// from without running anything.
func buildNoOp(*Env, *Node) (Kernel, error) {
	return func(*Context) error { return nil }, nil
}

func buildShape(_ *Env, n *Node) (Kernel, error) {
	out := n.typeOf("out_type")
	return func(c *Context) error {
		t, err := c.input(0)
		if err != nil {
			return err
		}
		r, _ := tensor.New(out, []int64{int64(len(t.Shape))})
		for i, d := range t.Shape {
			setIndex(&r, i, d)
		}
		c.setOut(0, r)
		return nil
	}, nil
}

func buildReshape(*Env, *Node) (Kernel, error) {
	return reshapeKernel(func(t, st *wire.Tensor) ([]int64, error) {
		dims, err := indices(st)
		if err != nil || len(st.Shape) > 1 {
			return nil, status.Errorf(wire.InvalidArgument, "shape must be a vector of int32 or int64, is %v%v", st.DType, st.Shape)
		}
		total, _ := t.NumElements()
		return inferShape(dims, total)
	}), nil
}

// reshapeKernel is the kernel of an op (Reshape, ExpandDims) whose output
// is input 0 under the shape that shape computes from it and input 1: a
// view sharing input 0's memory.
func reshapeKernel(shape func(t, arg *wire.Tensor) ([]int64, error)) Kernel {
	return func(c *Context) error {
		var in [2]*wire.Tensor
		if err := c.inputs(in[:]); err != nil {
			return err
		}
		s, err := shape(in[0], in[1])
		if err != nil {
			return err
		}
		r := tensor.Ref(*in[0])
		r.Shape = s
		c.setOut(0, r)
		return nil
	}
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
			return nil, status.Errorf(wire.InvalidArgument, "reshape to %v: bad dimension %d", dims, d)
		default:
			known *= d
		}
	}
	if unknown >= 0 {
		if known == 0 || total%known != 0 {
			return nil, status.Errorf(wire.InvalidArgument, "reshape %d elements to %v", total, dims)
		}
		shape[unknown] = total / known
		known = total
	}
	if known != total {
		return nil, status.Errorf(wire.InvalidArgument, "reshape %d elements to %v", total, dims)
	}
	return shape, nil
}

func buildZerosLike(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		t, err := c.input(0)
		if err != nil {
			return err
		}
		r, err := tensor.New(t.DType, t.Shape)
		if err != nil {
			return err
		}
		clear(r.Data)
		c.setOut(0, r)
		return nil
	}, nil
}

func buildFill(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		var in [2]*wire.Tensor
		if err := c.inputs(in[:]); err != nil {
			return err
		}
		dt, v := in[0], in[1]
		dims, err := indices(dt)
		if err != nil || len(dt.Shape) != 1 {
			return status.Errorf(wire.InvalidArgument, "dims must be an int vector, is %v%v", dt.DType, dt.Shape)
		}
		if len(v.Shape) != 0 {
			return status.Errorf(wire.InvalidArgument, "value must be a scalar, has shape %v", v.Shape)
		}
		for _, d := range dims {
			if d < 0 {
				return status.Errorf(wire.InvalidArgument, "negative dimension in %v", dims)
			}
		}
		r, err := tensor.New(v.DType, dims)
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
		return append([]int64(nil), tensor.View[int64](t.Data)...), nil
	case wire.DTInt32:
		v := tensor.View[int32](t.Data)
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out, nil
	}
	return nil, status.Errorf(wire.InvalidArgument, "indices are %v, want int32 or int64", t.DType)
}

// setIndex stores v as element i of an int32 or int64 tensor.
func setIndex(t *wire.Tensor, i int, v int64) {
	if t.DType == wire.DTInt64 {
		tensor.View[int64](t.Data)[i] = v
	} else {
		tensor.View[int32](t.Data)[i] = int32(v)
	}
}

// buildIdentityN forwards each input as the output of the same index;
// function calls become one when inlined.
func buildIdentityN(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		for i, in := range c.In {
			if in.v != nil && !in.isRef {
				c.Out[i] = in
				continue
			}
			t, err := c.input(i)
			if err != nil {
				return err
			}
			c.forward(i, t)
		}
		return nil
	}, nil
}

func buildSize(_ *Env, n *Node) (Kernel, error) {
	out := n.typeOf("out_type")
	return func(c *Context) error {
		t, err := c.input(0)
		if err != nil {
			return err
		}
		size, _ := t.NumElements()
		if out == wire.DTInt32 && size > math.MaxInt32 {
			return status.Errorf(wire.InvalidArgument, "size %d does not fit int32", size)
		}
		r, _ := tensor.New(out, nil)
		setIndex(&r, 0, size)
		c.setOut(0, r)
		return nil
	}, nil
}

// buildRange builds Range(start, limit, delta): start, start+delta, ...
// up to limit, excluded.
func buildRange(_ *Env, n *Node) (Kernel, error) {
	dt, run := rangeByDType.of(n, "Tidx")
	return func(c *Context) error {
		var in [3]*wire.Tensor
		if err := c.typedInputs(dt, in[:]); err != nil {
			return err
		}
		for i, name := range []string{"start", "limit", "delta"} {
			if len(in[i].Shape) != 0 {
				return status.Errorf(wire.InvalidArgument, "%s must be a scalar, has shape %v", name, in[i].Shape)
			}
		}
		r, err := run(dt, in)
		if err != nil {
			return err
		}
		c.setOut(0, r)
		return nil
	}, nil
}

var rangeByDType = numericTable(rangeOf[float32], rangeOf[float64], rangeOf[int32], rangeOf[int64])

func rangeOf[T numeric](dt wire.DataType, in [3]*wire.Tensor) (wire.Tensor, error) {
	start, limit, delta := tensor.View[T](in[0].Data)[0], tensor.View[T](in[1].Data)[0], tensor.View[T](in[2].Data)[0]
	switch {
	case delta == 0:
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "delta must not be 0")
	case delta > 0 && start > limit, delta < 0 && start < limit:
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "start %v and limit %v are the wrong way round for delta %v", start, limit, delta)
	}
	span := math.Abs(float64(limit) - float64(start))
	n := int64(math.Ceil(span / math.Abs(float64(delta))))
	r, err := tensor.New(dt, []int64{n})
	if err != nil {
		return wire.Tensor{}, err
	}
	fillRange(tensor.View[T](r.Data), start, delta)
	return r, nil
}

// fillRange sets v[i] = start + i·delta, each from i rather than by
// adding delta up, so that float ranges round as TensorFlow's do. It
// writes four elements an iteration: the one-element loop ran 8.2 or 9.2
// µs for BenchmarkKernels/Range/int64 depending only on where the linker
// placed it.
func fillRange[T numeric](v []T, start, delta T) {
	i := 0
	for ; i+4 <= len(v); i += 4 {
		q := v[i : i+4 : i+4]
		x := T(i)
		q[0] = start + x*delta
		q[1] = start + (x+1)*delta
		q[2] = start + (x+2)*delta
		q[3] = start + (x+3)*delta
	}
	for ; i < len(v); i++ {
		v[i] = start + T(i)*delta
	}
}

// An indexBuf holds int32 indices widened to int64 for one kernel run.
type indexBuf struct{ v []int64 }

var indexBufs = sync.Pool{New: func() any { return new(indexBuf) }}

// readIndices is indices for a kernel that only reads them while it runs
// (gathers, scatters, segment sums, sparse updates): an int64 tensor's own
// elements, or an int32 one's widened into a pooled buffer, so that the
// step's index tensors are not copied into fresh memory every step. The
// kernel calls release on the buffer (nil for int64) once it no longer
// reads the indices, and never writes them.
func readIndices(t *wire.Tensor) ([]int64, *indexBuf, error) {
	switch t.DType {
	case wire.DTInt64:
		return tensor.View[int64](t.Data), nil, nil
	case wire.DTInt32:
		v := tensor.View[int32](t.Data)
		b := indexBufs.Get().(*indexBuf)
		b.v = slices.Grow(b.v[:0], len(v))[:len(v)]
		for i, x := range v {
			b.v[i] = int64(x)
		}
		return b.v, b, nil
	}
	return nil, nil, status.Errorf(wire.InvalidArgument, "indices are %v, want int32 or int64", t.DType)
}

func (b *indexBuf) release() {
	if b != nil {
		indexBufs.Put(b)
	}
}
