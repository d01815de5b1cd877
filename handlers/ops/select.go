package ops

import (
	"slices"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
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
	registerOp("Select", &Spec{Build: buildSelect(false)})
	registerOp("SelectV2", &Spec{Build: buildSelect(true)})
}

func buildSelect(v2 bool) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		if err := n.wantInputs(3); err != nil {
			return nil, err
		}
		dt, err := n.attrType("T")
		if err != nil {
			return nil, err
		}
		if dt != wire.DTString && dt.Size() == 0 {
			return nil, rpc.Errorf(wire.InvalidArgument, "attr \"T\" is %v: Select takes tensors of fixed-size types or strings", dt)
		}
		n.NumOutputs = 1
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
			return nil, nil, rpc.Errorf(wire.InvalidArgument, "then and else: incompatible shapes %v and %v", t, e)
		}
		out, err := broadcastShape(cond, te)
		if err != nil {
			return nil, nil, rpc.Errorf(wire.InvalidArgument, "condition: incompatible shapes %v and %v", cond, te)
		}
		return cond, out, nil
	}
	if !slices.Equal(t, e) {
		return nil, nil, rpc.Errorf(wire.InvalidArgument, "'then' and 'else' must have the same shape, have %v and %v", t, e)
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
	return nil, nil, rpc.Errorf(wire.InvalidArgument, "condition of shape %v: want a scalar, a vector of %d (then's first dimension) or shape %v", cond, firstDim(t), t)
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
		return wire.Tensor{}, rpc.Errorf(wire.InvalidArgument, "bad result shape %v", out)
	}
	var tElems, eElems, rElems [][]byte
	var r wire.Tensor
	sz := t.DType.Size()
	if t.DType == wire.DTString {
		var err error
		if tElems, err = stringElems(t); err != nil {
			return wire.Tensor{}, err
		}
		if eElems, err = stringElems(e); err != nil {
			return wire.Tensor{}, err
		}
		rElems = make([][]byte, n)
	} else {
		var err error
		if r, err = tensor.New(t.DType, out); err != nil {
			return wire.Tensor{}, err
		}
	}
	sc, st, se := broadcastStrides(condShape, out), broadcastStrides(t.Shape, out), broadcastStrides(e.Shape, out)
	idx := make([]int64, len(out))
	var ic, it, ie int64
	for i := range n {
		pick, from := e, ie
		if cond.Data[ic] != 0 {
			pick, from = t, it
		}
		if rElems != nil {
			if pick == t {
				rElems[i] = tElems[from]
			} else {
				rElems[i] = eElems[from]
			}
		} else {
			copy(r.Data[i*int64(sz):(i+1)*int64(sz)], pick.Data[from*int64(sz):(from+1)*int64(sz)])
		}
		for d := len(out) - 1; d >= 0; d-- {
			idx[d]++
			ic, it, ie = ic+sc[d], it+st[d], ie+se[d]
			if idx[d] < out[d] {
				break
			}
			ic, it, ie = ic-sc[d]*out[d], it-st[d]*out[d], ie-se[d]*out[d]
			idx[d] = 0
		}
	}
	if rElems != nil {
		return encodeStringTensor(out, rElems)
	}
	return r, nil
}
