package ops

import (
	"encoding/binary"
	"slices"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// Select and SelectV2 pick each element of their result from t where the
// condition holds and from e where it does not, for every dtype, strings
// included: TensorFlow 2's checkpoint save function selects a shard
// suffix with one (array_ops.where of two scalars).
//
// SelectV2 broadcasts condition, t and e together, as NumPy does. Select,
// TensorFlow 1's, takes t and e of one shape and a condition that is a
// scalar, of that shape, or a vector along t's first dimension.

func init() {
	// Select takes tensors of fixed-size types or strings.
	t := []TypeAttr{storable("T")}
	registerOp("Select", &Spec{Inputs: exactly(3), Types: t, NumOutputs: exactly(1), Build: buildSelect(false)})
	registerOp("SelectV2", &Spec{Inputs: exactly(3), Types: t, NumOutputs: exactly(1), Build: buildSelect(true)})
}

func buildSelect(v2 bool) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dt := n.typeOf("T")
		return func(c *Context) error {
			cond, err := c.typed(0, wire.DTBool)
			if err != nil {
				return err
			}
			t, err := c.typed(1, dt)
			if err != nil {
				return err
			}
			e, err := c.typed(2, dt)
			if err != nil {
				return err
			}
			condShape, out, err := selectShapes(v2, cond.Shape, t.Shape, e.Shape)
			if err != nil {
				return err
			}
			r, err := selectInto(out, cond, condShape, t, e)
			if err != nil {
				return err
			}
			c.setOut(0, r)
			return nil
		}, nil
	}
}

// selectShapes returns the shape to read the condition with and the
// result's shape, or InvalidArgument when the shapes do not go together.
func selectShapes(v2 bool, cond, t, e []int64) ([]int64, []int64, error) {
	if v2 {
		te, err := broadcastShape(t, e)
		if err != nil {
			return nil, nil, status.Errorf(wire.InvalidArgument, "then and else: incompatible shapes %v and %v", t, e)
		}
		out, err := broadcastShape(cond, te)
		if err != nil {
			return nil, nil, status.Errorf(wire.InvalidArgument, "condition: incompatible shapes %v and %v", cond, te)
		}
		return cond, out, nil
	}
	if !slices.Equal(t, e) {
		return nil, nil, status.Errorf(wire.InvalidArgument, "'then' and 'else' must have the same shape, have %v and %v", t, e)
	}
	switch {
	case len(cond) == 0, slices.Equal(cond, t):
		return cond, t, nil
	case len(cond) == 1 && len(t) > 1 && cond[0] == t[0]:
		// A vector condition picks whole rows: read it as [n, 1, …].
		rows := make([]int64, len(t))
		for i := range rows {
			rows[i] = 1
		}
		rows[0] = cond[0]
		return rows, t, nil
	}
	return nil, nil, status.Errorf(wire.InvalidArgument, "condition of shape %v: want a scalar, a vector of %d (then's first dimension) or shape %v", cond, firstDim(t), t)
}

func firstDim(shape []int64) int64 {
	if len(shape) == 0 {
		return 0
	}
	return shape[0]
}

// selectInto computes the result of shape out, each operand read under
// broadcasting (zero strides along its broadcast dimensions).
func selectInto(out []int64, cond *wire.Tensor, condShape []int64, t, e *wire.Tensor) (wire.Tensor, error) {
	n, ok := tensor.NumElements(out)
	if !ok {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "bad result shape %v", out)
	}
	w := selectWalk{out: out, cond: cond, sc: broadcastStrides(condShape, out), st: broadcastStrides(t.Shape, out), se: broadcastStrides(e.Shape, out)}
	if t.DType == wire.DTString {
		return selectStrings(&w, n, t, e)
	}
	r, err := tensor.New(t.DType, out)
	if err != nil {
		return wire.Tensor{}, err
	}
	sz := int64(t.DType.Size())
	w.each(n, func(i int64, fromT bool, j int64) {
		src := e.Data
		if fromT {
			src = t.Data
		}
		copy(r.Data[i*sz:(i+1)*sz], src[j*sz:(j+1)*sz])
	})
	return r, nil
}

// selectStrings is selectInto for strings, in two walks: the first sizes
// the result, so that a broadcast to billions of elements is refused
// before anything is allocated for them, the second encodes it.
func selectStrings(w *selectWalk, n int64, t, e *wire.Tensor) (wire.Tensor, error) {
	tElems, err := stringElems(t)
	if err != nil {
		return wire.Tensor{}, err
	}
	eElems, err := stringElems(e)
	if err != nil {
		return wire.Tensor{}, err
	}
	pick := func(fromT bool, j int64) []byte {
		if fromT {
			return tElems[j]
		}
		return eElems[j]
	}
	var size int64
	if n > tensor.MaxBytes {
		size = n // each element takes a byte at least
	} else {
		w.each(n, func(_ int64, fromT bool, j int64) {
			l := len(pick(fromT, j))
			size += int64(l + uvarintLen(uint64(l)))
		})
	}
	if size > tensor.MaxBytes {
		return wire.Tensor{}, status.Errorf(wire.ResourceExhausted, "string tensor of shape %v: over %d bytes", w.out, tensor.MaxBytes)
	}
	buf := wire.NewBuffer(int(size))
	data := buf.Bytes()[:0]
	w.each(n, func(_ int64, fromT bool, j int64) {
		s := pick(fromT, j)
		data = binary.AppendUvarint(data, uint64(len(s)))
		data = append(data, s...)
	})
	return wire.Tensor{DType: wire.DTString, Shape: append([]int64(nil), w.out...), Data: data, Buf: buf}, nil
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// A selectWalk walks a Select's result in order, following each operand's
// offset by its broadcast strides.
type selectWalk struct {
	out        []int64
	cond       *wire.Tensor
	sc, st, se []int64
}

// each calls f for each of the n elements of the result with whether it
// comes from t and its offset in the operand it comes from.
func (w *selectWalk) each(n int64, f func(i int64, fromT bool, j int64)) {
	idx := make([]int64, len(w.out))
	var ic, it, ie int64
	for i := range n {
		if w.cond.Data[ic] != 0 {
			f(i, true, it)
		} else {
			f(i, false, ie)
		}
		for d := len(w.out) - 1; d >= 0; d-- {
			idx[d]++
			ic, it, ie = ic+w.sc[d], it+w.st[d], ie+w.se[d]
			if idx[d] < w.out[d] {
				break
			}
			ic, it, ie = ic-w.sc[d]*w.out[d], it-w.st[d]*w.out[d], ie-w.se[d]*w.out[d]
			idx[d] = 0
		}
	}
}
