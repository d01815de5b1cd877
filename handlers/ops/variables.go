package ops

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// rowStripes is the number of row locks per variable.
const rowStripes = 64

// A variable is a tensor that outlives steps, shared by every step that
// names it (VarHandleOp, VariableV2).
//
// Locking, so that many steps may update one embedding table at once:
//   - Dense updates (Assign, AssignVariableOp, AssignAddVariableOp,
//     ApplyGradientDescent) hold mu for writing.
//   - Sparse row operations (ResourceGather, ResourceScatterAdd,
//     ResourceSparseApplyAdagrad) hold mu for reading, then for each row r
//     the stripe lock rows[r%rowStripes], one stripe at a time (gathers and
//     Adagrad take each stripe once for all its rows: see stripeOrder).
//     Updates of different rows proceed in parallel; updates of one row are
//     serialized, so duplicate indices and concurrent steps add up exactly.
//   - Dense reads (ReadVariableOp, reading a VariableV2 ref) hold mu for
//     reading and every stripe, in ascending order, and copy the tensor, so
//     a step never sees a row half-updated.
//
// An operation on two variables (var and accumulator of Adagrad) takes
// their locks in the order of their ids. t and init are guarded by mu, the
// elements of t by mu and the row stripes as above.
type variable struct {
	id    uint64
	name  string // container/shared_name, for messages
	dtype wire.DataType

	mu   sync.RWMutex
	rows [rowStripes]sync.Mutex
	t    wire.Tensor // owns t.Buf
	init bool
}

var variableIDs atomic.Uint64

// Variables is a worker's resource manager: variables by container and
// shared name, created by the first step that names them and kept across
// steps until Cleanup. Safe for concurrent use.
type Variables struct {
	mu     sync.Mutex
	m      map[varKey]*variable
	tables tables // lookup tables and embedding variables (lookup_table.go)
}

type varKey struct{ container, name string }

// NewVariables returns an empty resource manager.
func NewVariables() *Variables { return &Variables{m: make(map[varKey]*variable)} }

// lookup returns the variable, creating an uninitialized one of dtype. A
// dtype of DTInvalid accepts whatever the variable already holds.
func (vs *Variables) lookup(container, name string, dtype wire.DataType) (*variable, error) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	k := varKey{container, name}
	v := vs.m[k]
	if v == nil {
		v = &variable{id: variableIDs.Add(1), name: container + "/" + name, dtype: dtype}
		vs.m[k] = v
		return v, nil
	}
	if dtype != wire.DTInvalid && v.dtype != dtype {
		return nil, status.Errorf(wire.InvalidArgument, "variable %s holds %v, not %v", v.name, v.dtype, dtype)
	}
	return v, nil
}

// Cleanup drops the variables and lookup tables of the named containers,
// or all of them when none is named. Steps still holding one keep a working (orphaned) copy.
func (vs *Variables) Cleanup(containers []string) {
	vs.tables.cleanup(containers)
	vs.mu.Lock()
	defer vs.mu.Unlock()
	drop := func(k varKey, v *variable) {
		delete(vs.m, k)
		v.mu.Lock()
		v.t.Buf.Release()
		v.t, v.init = wire.Tensor{}, false
		v.mu.Unlock()
	}
	for k, v := range vs.m {
		if len(containers) == 0 {
			drop(k, v)
			continue
		}
		for _, c := range containers {
			if k.container == c {
				drop(k, v)
			}
		}
	}
}

// checkDType refuses an op whose dtype attribute is not the dtype the
// variable was created with.
func (v *variable) checkDType(dt wire.DataType) error {
	if v.dtype != dt {
		return status.Errorf(wire.InvalidArgument, "variable %s holds %v, dtype is %v", v.name, v.dtype, dt)
	}
	return nil
}

func errUninitialized(v *variable) error {
	return status.Errorf(wire.FailedPrecondition, "attempting to use uninitialized value %s", v.name)
}

// read returns a copy of the variable's value, owned by the caller.
func (v *variable) read() (wire.Tensor, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if !v.init {
		return wire.Tensor{}, errUninitialized(v)
	}
	for i := range v.rows {
		v.rows[i].Lock()
	}
	out := tensor.Copy(&v.t)
	for i := range v.rows {
		v.rows[i].Unlock()
	}
	return out, nil
}

// assign replaces the value with a copy of t. With validateShape, an
// initialized variable keeps its shape.
func (v *variable) assign(t *wire.Tensor, validateShape bool) error {
	if t.DType != v.dtype {
		return status.Errorf(wire.InvalidArgument, "assign %v to variable %s of %v", t.DType, v.name, v.dtype)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.init && validateShape && !sameShape(v.t.Shape, t.Shape) {
		return status.Errorf(wire.InvalidArgument, "assign shape %v to variable %s of shape %v", t.Shape, v.name, v.t.Shape)
	}
	if v.init && len(v.t.Data) == len(t.Data) && t.DType != wire.DTString {
		copy(v.t.Data, t.Data)
		v.t.Shape = append(v.t.Shape[:0], t.Shape...)
		return nil
	}
	v.t.Buf.Release()
	v.t = tensor.Copy(t)
	v.init = true
	return nil
}

// update runs f on the value with mu held for writing.
func (v *variable) update(f func(t *wire.Tensor) error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.init {
		return errUninitialized(v)
	}
	return f(&v.t)
}

// sameShape reports whether two shapes have the same dimensions.
func sameShape(a, b []int64) bool { return slices.Equal(a, b) }
