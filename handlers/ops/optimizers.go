package ops

import (
	"cmp"
	"math"
	"slices"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// The optimizers' update ops: Adam and Momentum, dense and sparse, on refs
// (VariableV2) and on resource handles, and dense Adagrad (its sparse
// forms are in sparse.go). Their formulas are TensorFlow's
// (training_ops.cc); the sparse Adam ops, which stock TensorFlow lacks, are
// DeepRec's: a lazy Adam that updates only the rows of the indices.

func init() {
	adam := map[string]*tfpb.AttrValue{"use_locking": boolAttr(false), "use_nesterov": boolAttr(false)}
	registerOp("ApplyAdam", applySpec(adam, adamUpdate, true, false))
	registerOp("ResourceApplyAdam", applySpec(adam, adamUpdate, false, false))
	registerOp("SparseApplyAdam", applySpec(adam, adamUpdate, true, true))
	registerOp("ResourceSparseApplyAdam", applySpec(adam, adamUpdate, false, true))
	registerOp("ApplyMomentum", applySpec(adam, momentumUpdate, true, false))
	registerOp("ResourceApplyMomentum", applySpec(adam, momentumUpdate, false, false))
	registerOp("SparseApplyMomentum", applySpec(adam, momentumUpdate, true, true))
	registerOp("ResourceSparseApplyMomentum", applySpec(adam, momentumUpdate, false, true))
	adagrad := map[string]*tfpb.AttrValue{"use_locking": boolAttr(false), "update_slots": boolAttr(true)}
	registerOp("ApplyAdagrad", applySpec(adagrad, adagradUpdate, true, false))
	registerOp("ResourceApplyAdagrad", applySpec(adagrad, adagradUpdate, false, false))
}

// An update describes one optimizer: its variables (var and its slots),
// the scalar hyperparameters that follow them, and the arithmetic on one
// run of elements.
type update struct {
	name    string
	vars    int      // var, then slots
	scalars []string // inputs after the variables, before grad
	// runners holds, for each float type, the code that applies the
	// update to runs of elements (see runnerOf).
	runners byDType[func(in *applyInputs, nesterov bool) rowRun]
	// flag is the bool attribute handed to the runners as nesterov:
	// "use_nesterov" when empty; Adagrad's is "update_slots".
	flag string
}

// A rowRun applies an update to the run of elements part picks out of
// each variable, with gradient g.
type rowRun func(part func(*variable) []byte, g []byte)

// runnerOf returns the code of an update whose arithmetic on one run of
// elements of type T is apply: it updates vars (var, slots...) from grad
// with scalars s, all of one length. The rowRun it makes for one step
// allocates its scratch once, so a sparse update allocates nothing per
// row.
func runnerOf[T floating](apply func(vars [][]T, g, s []T, nesterov bool)) func(in *applyInputs, nesterov bool) rowRun {
	return func(in *applyInputs, nesterov bool) rowRun {
		vs := make([][]T, len(in.vars))
		s, ok := any(in.scalars).([]T) // float64 scalars are used as they are
		if !ok {
			s = make([]T, len(in.scalars))
			for i, x := range in.scalars {
				s[i] = T(x)
			}
		}
		return func(part func(*variable) []byte, g []byte) {
			for i, v := range in.vars {
				vs[i] = tensor.View[T](part(v))
			}
			apply(vs, tensor.View[T](g), s, nesterov)
		}
	}
}

var adamUpdate = &update{
	name: "Adam", vars: 3, scalars: []string{"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"},
	runners: floatTable(runnerOf(adamRun[float32]), runnerOf(adamRun[float64])),
}

var momentumUpdate = &update{
	name: "Momentum", vars: 2, scalars: []string{"lr"},
	// ApplyMomentum(var, accum, lr, grad, momentum);
	// SparseApplyMomentum(var, accum, lr, grad, indices, momentum).
	runners: floatTable(runnerOf(momentumRun[float32]), runnerOf(momentumRun[float64])),
}

var adagradUpdate = &update{
	name: "Adagrad", vars: 2, scalars: []string{"lr"}, flag: "update_slots",
	runners: floatTable(runnerOf(adagradRun[float32]), runnerOf(adagradRun[float64])),
}

// adagradRun is TensorFlow's ApplyAdagrad: s holds lr; updateSlots says
// whether accum takes g² first.
func adagradRun[T float32 | float64](vs [][]T, g, s []T, updateSlots bool) {
	v, acc := vs[0], vs[1]
	lr := s[0]
	g = g[:len(v)]
	for i := range v {
		if updateSlots {
			acc[i] += g[i] * g[i]
		}
		v[i] -= lr * g[i] / T(math.Sqrt(float64(acc[i])))
	}
}

// adamRun is TensorFlow's ApplyAdam on a run of elements: s holds
// beta1_power, beta2_power, lr, beta1, beta2, epsilon.
func adamRun[T float32 | float64](vs [][]T, g, s []T, nesterov bool) {
	v, m, sq := vs[0], vs[1], vs[2]
	b1p, b2p, lr, b1, b2, eps := s[0], s[1], s[2], s[3], s[4], s[5]
	alpha := lr * T(math.Sqrt(float64(1-b2p))) / (1 - b1p)
	g = g[:len(v)]
	for i := range v {
		m[i] += (g[i] - m[i]) * (1 - b1)
		sq[i] += (g[i]*g[i] - sq[i]) * (1 - b2)
		step := m[i]
		if nesterov {
			step = m[i]*b1 + (1-b1)*g[i]
		}
		v[i] -= alpha * step / (T(math.Sqrt(float64(sq[i]))) + eps)
	}
}

// momentumRun is TensorFlow's ApplyMomentum: s holds lr and momentum.
func momentumRun[T float32 | float64](vs [][]T, g, s []T, nesterov bool) {
	v, acc := vs[0], vs[1]
	lr, mom := s[0], s[1]
	g = g[:len(v)]
	for i := range v {
		acc[i] = acc[i]*mom + g[i]
		if nesterov {
			v[i] -= g[i]*lr + acc[i]*mom*lr
		} else {
			v[i] -= lr * acc[i]
		}
	}
}

// applyInputs are the inputs of one optimizer op in one step.
type applyInputs struct {
	vars    []*variable
	scalars []float64 // converted to the op's type by the caller
	grad    *wire.Tensor
	idx     []int64 // sparse ops
	idxT    *wire.Tensor
}

// applySpec is the Spec of one optimizer op, as buildApply builds it: the
// variables, the scalars, the gradient (and the momentum, and the indices
// of a sparse update) as data inputs; an element type T; the ref of var as
// output when the variables are refs.
func applySpec(defaults map[string]*tfpb.AttrValue, u *update, ref, sparse bool) *Spec {
	inputs := u.vars + len(u.scalars) + 1
	if u == momentumUpdate {
		inputs++ // momentum
	}
	types := []TypeAttr{u.runners.attr("T")}
	if sparse {
		inputs++
		types = append(types, typeIn("Tindices", indexTypes...))
	}
	outputs := 0
	if ref {
		outputs = 1
	}
	return &Spec{Defaults: defaults, Inputs: exactly(inputs), Types: types, NumOutputs: exactly(outputs), Build: buildApply(u, ref, sparse)}
}

// buildApply builds one optimizer op: ref says whether the variables are
// VariableV2 refs (the op then outputs var's ref) or resource handles,
// sparse whether a gradient row comes with each index.
func buildApply(u *update, ref, sparse bool) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dt, _ := u.runners.of(n, "T")
		flag := cmp.Or(u.flag, "use_nesterov")
		nesterov, err := n.attrBool(flag)
		if err != nil {
			return nil, err
		}
		return func(c *Context) error {
			in, err := c.applyInputs(u, dt, ref, sparse)
			if err != nil {
				return err
			}
			if sparse {
				err = sparseApply(u, dt, in, nesterov)
			} else {
				err = denseApply(u, dt, in, nesterov)
			}
			if err != nil {
				return err
			}
			if ref {
				c.Out[0] = c.In[0]
			}
			return nil
		}, nil
	}
}

// applyInputs reads an optimizer op's inputs: the variables, distinct and
// of the wanted kind; the scalars; the gradient; and, for sparse ops, the
// indices.
func (c *Context) applyInputs(u *update, dt wire.DataType, ref, sparse bool) (*applyInputs, error) {
	in := &applyInputs{}
	kind := map[bool]string{true: "variable ref", false: "resource handle"}[ref]
	for i := range u.vars {
		v := c.In[i].v
		if v == nil || c.In[i].isRef != ref {
			return nil, status.Errorf(wire.InvalidArgument, "input %d is not a %s", i, kind)
		}
		if slices.Contains(in.vars, v) {
			return nil, status.Errorf(wire.InvalidArgument, "input %d is variable %s again", i, v.name)
		}
		if err := v.checkDType(dt); err != nil {
			return nil, err
		}
		in.vars = append(in.vars, v)
	}
	// Inputs after the variables: the scalars, grad, then (sparse)
	// indices, then Momentum's momentum scalar.
	next := u.vars
	scalar := func(name string) error {
		t, err := c.typed(next, dt)
		if err != nil {
			return err
		}
		if len(t.Shape) != 0 {
			return status.Errorf(wire.InvalidArgument, "%s (input %d) must be a scalar, has shape %v", name, next, t.Shape)
		}
		in.scalars = append(in.scalars, scalarFloat(t))
		next++
		return nil
	}
	for _, name := range u.scalars {
		if err := scalar(name); err != nil {
			return nil, err
		}
	}
	g, err := c.typed(next, dt)
	if err != nil {
		return nil, err
	}
	in.grad = g
	next++
	if sparse {
		t, err := c.input(next)
		if err != nil {
			return nil, err
		}
		if in.idx, err = indices(t); err != nil || len(t.Shape) != 1 {
			return nil, errOr(err, "indices must be a vector, have shape %v", t.Shape)
		}
		in.idxT = t
		next++
	}
	if u == momentumUpdate {
		if err := scalar("momentum"); err != nil {
			return nil, err
		}
	}
	return in, nil
}

func scalarFloat(t *wire.Tensor) float64 {
	if t.DType == wire.DTDouble {
		return tensor.View[float64](t.Data)[0]
	}
	return float64(tensor.View[float32](t.Data)[0])
}

// lockOrder returns vs sorted by id, the order their locks are taken in
// (see variable).
func lockOrder(vs []*variable) []*variable {
	sorted := slices.Clone(vs)
	slices.SortFunc(sorted, func(a, b *variable) int { return cmp.Compare(a.id, b.id) })
	return sorted
}

// checkSlots refuses slots that do not match var's shape, and a gradient
// of the wrong shape (want).
func checkSlots(u *update, in *applyInputs, want []int64) error {
	vt := &in.vars[0].t
	for _, s := range in.vars[1:] {
		if !sameShape(s.t.Shape, vt.Shape) {
			return status.Errorf(wire.InvalidArgument, "%s slot %s has shape %v, var %s has %v", u.name, s.name, s.t.Shape, in.vars[0].name, vt.Shape)
		}
	}
	if !sameShape(in.grad.Shape, want) {
		return status.Errorf(wire.InvalidArgument, "grad has shape %v, want %v", in.grad.Shape, want)
	}
	return nil
}

// denseApply updates whole variables, holding each one's lock for writing.
func denseApply(u *update, dt wire.DataType, in *applyInputs, nesterov bool) error {
	order := lockOrder(in.vars)
	for _, v := range order {
		v.mu.Lock()
		defer v.mu.Unlock()
	}
	for _, v := range in.vars {
		if !v.init {
			return errUninitialized(v)
		}
	}
	if err := checkSlots(u, in, in.vars[0].t.Shape); err != nil {
		return err
	}
	rowRunner(u, dt, in, nesterov)(func(v *variable) []byte { return v.t.Data }, in.grad.Data)
	return nil
}

// sparseApply updates the rows of the indices, holding each variable's
// lock for reading and the row's stripes (see variable).
func sparseApply(u *update, dt wire.DataType, in *applyInputs, nesterov bool) error {
	order := lockOrder(in.vars)
	for _, v := range order {
		v.mu.RLock()
		defer v.mu.RUnlock()
	}
	for _, v := range in.vars {
		if !v.init {
			return errUninitialized(v)
		}
	}
	vt := &in.vars[0].t
	if len(vt.Shape) == 0 {
		return status.Errorf(wire.InvalidArgument, "row access to scalar variable %s", in.vars[0].name)
	}
	if err := checkSlots(u, in, gatherShape(vt.Shape, in.idxT.Shape, 0)); err != nil {
		return err
	}
	l := layoutAt(vt, 0)
	if err := checkIndices(in.idx, l.rows); err != nil {
		return err
	}
	run := rowRunner(u, dt, in, nesterov)
	var x int64
	row := func(v *variable) []byte { return v.t.Data[int(x)*l.rowBytes : int(x+1)*l.rowBytes] }
	for i := range in.idx {
		x = in.idx[i]
		for _, v := range order {
			v.lockRow(x)
		}
		run(row, in.grad.Data[i*l.rowBytes:(i+1)*l.rowBytes])
		for _, v := range slices.Backward(order) {
			v.unlockRow(x)
		}
	}
	return nil
}

// rowRunner returns u's rowRun for this step's inputs in of dtype dt,
// which the builder checked u supports.
func rowRunner(u *update, dt wire.DataType, in *applyInputs, nesterov bool) rowRun {
	runner, _ := u.runners.lookup(dt)
	return runner(in, nesterov)
}
