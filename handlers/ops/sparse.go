package ops

import (
	"math"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	registerOp("GatherV2", &Spec{Defaults: map[string]*tfpb.AttrValue{"batch_dims": intAttr(0)},
		Inputs: exactly(3), Types: []TypeAttr{anyType("Tparams"), typeIn("Tindices", indexTypes...), typeIn("Taxis", indexTypes...)}, NumOutputs: exactly(1), Build: buildGatherV2})
	registerOp("ResourceGather", &Spec{Defaults: map[string]*tfpb.AttrValue{"batch_dims": intAttr(0), "validate_indices": boolAttr(true)},
		Inputs: exactly(2), Types: []TypeAttr{anyType("dtype"), typeIn("Tindices", indexTypes...)}, NumOutputs: exactly(1), Build: buildResourceGather})
	registerOp("ResourceScatterAdd", scatterSpec(addOp))
	registerOp("ResourceSparseApplyAdagrad", &Spec{Defaults: map[string]*tfpb.AttrValue{"use_locking": boolAttr(false), "update_slots": boolAttr(true)},
		Inputs: exactly(5), Types: []TypeAttr{adagradByDType.attr("T"), typeIn("Tindices", indexTypes...)}, NumOutputs: exactly(0), Build: buildSparseApplyAdagrad})
}

// rowLayout describes a tensor as rows along its first (or axis-th)
// dimension: outer blocks of rows, each row of rowBytes.
type rowLayout struct {
	outer, rows, rowBytes int
}

func layoutAt(t *wire.Tensor, axis int) rowLayout {
	l := rowLayout{outer: 1, rows: int(t.Shape[axis]), rowBytes: t.DType.Size()}
	for _, d := range t.Shape[:axis] {
		l.outer *= int(d)
	}
	for _, d := range t.Shape[axis+1:] {
		l.rowBytes *= int(d)
	}
	return l
}

// checkIndices verifies every index is a row of a dimension of n.
func checkIndices(idx []int64, n int) error {
	for i, x := range idx {
		if x < 0 || x >= int64(n) {
			return status.Errorf(wire.InvalidArgument, "indices[%d] = %d is not in [0, %d)", i, x, n)
		}
	}
	return nil
}

// scatterRows checks an update of rows of t, as ResourceScatterAdd and
// ResourceSparseApplyAdagrad make one: u (named what in the error) must
// hold one row of t per index, and every index must be a row of t. It
// returns t's row layout.
func scatterRows(what string, u, t *wire.Tensor, idxShape, idx []int64) (rowLayout, error) {
	if want := gatherShape(t.Shape, idxShape, 0); !sameShape(u.Shape, want) {
		return rowLayout{}, status.Errorf(wire.InvalidArgument, "%s of shape %v for indices %v into %v, want %v", what, u.Shape, idxShape, t.Shape, want)
	}
	l := layoutAt(t, 0)
	return l, checkIndices(idx, l.rows)
}

// gatherShape is params' shape with dimension axis replaced by idxShape.
func gatherShape(params, idxShape []int64, axis int) []int64 {
	out := append([]int64(nil), params[:axis]...)
	out = append(out, idxShape...)
	return append(out, params[axis+1:]...)
}

func buildGatherV2(_ *Env, n *Node) (Kernel, error) {
	if err := n.rejectBatchDims(); err != nil {
		return nil, err
	}
	return func(c *Context) error {
		var in [3]*wire.Tensor
		if err := c.inputs(in[:]); err != nil {
			return err
		}
		params, it, at := in[0], in[1], in[2]
		idx, buf, err := readIndices(it)
		if err != nil {
			return err
		}
		defer buf.release()
		ax, err := indices(at)
		if err != nil || len(ax) != 1 || len(at.Shape) != 0 {
			return status.Errorf(wire.InvalidArgument, "axis must be an int scalar, is %v%v", at.DType, at.Shape)
		}
		axis := ax[0]
		if axis < 0 {
			axis += int64(len(params.Shape))
		}
		if axis < 0 || axis >= int64(len(params.Shape)) || params.DType.Size() == 0 {
			return status.Errorf(wire.InvalidArgument, "gather axis %d from %v%v", ax[0], params.DType, params.Shape)
		}
		l := layoutAt(params, int(axis))
		if err := checkIndices(idx, l.rows); err != nil {
			return err
		}
		r, err := tensor.New(params.DType, gatherShape(params.Shape, it.Shape, int(axis)))
		if err != nil {
			return err
		}
		dst := r.Data
		for o := 0; o < l.outer; o++ {
			block := params.Data[o*l.rows*l.rowBytes:]
			for _, x := range idx {
				dst = dst[copy(dst, block[int(x)*l.rowBytes:int(x+1)*l.rowBytes]):]
			}
		}
		c.setOut(0, r)
		return nil
	}, nil
}

// rejectBatchDims refuses a gather with batch dimensions: gathers here
// take whole rows of one table.
func (n *Node) rejectBatchDims() error {
	if bd, err := n.attrInt("batch_dims"); err != nil || bd != 0 {
		return errOr(err, "batch_dims %d is not supported", bd)
	}
	return nil
}

// errOr returns err, or a new InvalidArgument error when err is nil.
func errOr(err error, format string, args ...any) error {
	if err != nil {
		return err
	}
	return status.Errorf(wire.InvalidArgument, format, args...)
}

// lockRow and unlockRow take row r's stripe; mu must be held.
func (v *variable) lockRow(r int64)   { v.rows[uint64(r)%rowStripes].Lock() }
func (v *variable) unlockRow(r int64) { v.rows[uint64(r)%rowStripes].Unlock() }

// sparse runs f with mu held for reading on an initialized variable of
// rank ≥ 1; f takes row locks itself.
func (v *variable) sparse(f func(t *wire.Tensor) error) error {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if !v.init {
		return errUninitialized(v)
	}
	if len(v.t.Shape) == 0 {
		return status.Errorf(wire.InvalidArgument, "row access to scalar variable %s", v.name)
	}
	return f(&v.t)
}

func buildResourceGather(_ *Env, n *Node) (Kernel, error) {
	dt := n.typeOf("dtype")
	if err := n.rejectBatchDims(); err != nil {
		return nil, err
	}
	return func(c *Context) error {
		v, it, err := c.variableAndInput()
		if err != nil {
			return err
		}
		idx, buf, err := readIndices(it)
		if err != nil {
			return err
		}
		defer buf.release()
		if err := v.checkDType(dt); err != nil {
			return err
		}
		var r wire.Tensor
		err = v.sparse(func(t *wire.Tensor) error {
			l := layoutAt(t, 0)
			if err := checkIndices(idx, l.rows); err != nil {
				return err
			}
			if r, err = tensor.New(dt, gatherShape(t.Shape, it.Shape, 0)); err != nil {
				return err
			}
			touchRows(t.Data, idx, l.rowBytes)
			o := orderByStripe(idx)
			defer o.release()
			for st := range rowStripes {
				rows := o.stripe(st)
				if len(rows) == 0 {
					continue
				}
				v.rows[st].Lock()
				for _, i := range rows {
					x := int(idx[i])
					copy(r.Data[int(i)*l.rowBytes:], t.Data[x*l.rowBytes:(x+1)*l.rowBytes])
				}
				v.rows[st].Unlock()
			}
			return nil
		})
		if err != nil {
			return err
		}
		c.setOut(0, r)
		return nil
	}, nil
}

// buildSparseApplyAdagrad builds ResourceSparseApplyAdagrad: for each
// index i with gradient row g, accum[i] += g² (when update_slots), then
// var[i] -= lr · g / √accum[i].
func buildSparseApplyAdagrad(_ *Env, n *Node) (Kernel, error) {
	dt, run := adagradByDType.of(n, "T")
	updateSlots, err := n.attrBool("update_slots")
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		v, err := c.resource(0)
		if err != nil {
			return err
		}
		acc, err := c.resource(1)
		if err != nil {
			return err
		}
		lr, err := c.typed(2, dt)
		if err != nil {
			return err
		}
		g, err := c.typed(3, dt)
		if err != nil {
			return err
		}
		it, err := c.input(4)
		if err != nil {
			return err
		}
		idx, buf, err := readIndices(it)
		if err != nil || len(it.Shape) != 1 {
			return errOr(err, "indices must be a vector, have shape %v", it.Shape)
		}
		defer buf.release()
		if len(lr.Shape) != 0 {
			return status.Errorf(wire.InvalidArgument, "lr must be a scalar, has shape %v", lr.Shape)
		}
		if v == acc {
			return status.Errorf(wire.InvalidArgument, "var and accum are both %s", v.name)
		}
		// Locks in id order: see variable.
		first, second := v, acc
		if acc.id < v.id {
			first, second = acc, v
		}
		return first.sparse(func(*wire.Tensor) error {
			return second.sparse(func(*wire.Tensor) error {
				vt, at := &v.t, &acc.t
				if vt.DType != dt || at.DType != dt || !sameShape(vt.Shape, at.Shape) {
					return status.Errorf(wire.InvalidArgument, "var %v%v and accum %v%v must match, of %v", vt.DType, vt.Shape, at.DType, at.Shape, dt)
				}
				l, err := scatterRows("grad", g, vt, it.Shape, idx)
				if err != nil {
					return err
				}
				touchRows(vt.Data, idx, l.rowBytes)
				touchRows(at.Data, idx, l.rowBytes)
				o := orderByStripe(idx)
				defer o.release()
				for st := range rowStripes {
					rows := o.stripe(st)
					if len(rows) == 0 {
						continue
					}
					first.rows[st].Lock()
					second.rows[st].Lock()
					run(*vt, *at, *g, *lr, idx, rows, l.rowBytes/dt.Size(), updateSlots)
					second.rows[st].Unlock()
					first.rows[st].Unlock()
				}
				return nil
			})
		})
	}, nil
}

// adagradTensors is adagradRows on tensors of element type T; lr is a
// scalar.
func adagradTensors[T floating](v, acc, g, lr wire.Tensor, idx []int64, rows []int32, width int, updateSlots bool) {
	adagradRows(tensor.View[T](v.Data), tensor.View[T](acc.Data), tensor.View[T](g.Data), tensor.View[T](lr.Data)[0], idx, rows, width, updateSlots)
}

var adagradByDType = floatTable(adagradTensors[float32], adagradTensors[float64])

// adagradRows applies adagradRow to the rows idx[i] of v and acc, i in
// rows, with gradient row i of g; a row is width elements.
func adagradRows[T floating](v, acc, g []T, lr T, idx []int64, rows []int32, width int, updateSlots bool) {
	for _, i := range rows {
		lo, gl := int(idx[i])*width, int(i)*width
		adagradRow(v[lo:lo+width], acc[lo:lo+width], g[gl:gl+width], lr, updateSlots)
	}
}

// adagradRow is TensorFlow's Adagrad update of one row. TensorFlow's CPU
// kernel multiplies by Eigen's vectorized rsqrt, which is not correctly
// rounded (it refines the processor's approximate reciprocal square root),
// so the correctly rounded quotient here differs from TensorFlow's in the
// last bit of a few elements; the accumulators agree to the bit. Matching
// it would tie the result to one processor's rsqrt.
func adagradRow[T floating](v, acc, g []T, lr T, updateSlots bool) {
	acc, g = acc[:len(v)], g[:len(v)]
	if !updateSlots {
		for j := range v {
			v[j] -= lr * g[j] / T(math.Sqrt(float64(acc[j])))
		}
		return
	}
	for j := range v {
		a := acc[j] + g[j]*g[j]
		acc[j] = a
		v[j] -= lr * g[j] / T(math.Sqrt(float64(a)))
	}
}
