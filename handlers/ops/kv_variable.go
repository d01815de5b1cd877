package ops

import (
	"errors"
	"slices"
	"sync"

	"github.com/starwire/starwire/handlers/embedding"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// DeepRec's embedding variable ops, as a DeepRec graph places them on the
// ps: KvVarHandleOp, InitializeKvVariableOp, KvVarIsInitializedOp,
// KvResourceGather, KvResourceSparseApplyAdagrad and (kv_adam.go)
// KvResourceSparseApplyAdam, with DeepRec's names,
// inputs and attributes, over an embedding.Table (package embedding).
//
// DeepRec keeps an optimizer's slot as an embedding variable of its own
// that shares its primary's storage: InitializeKvVariableOp with
// resource_primary naming another variable makes the handle a slot of it,
// slot slot_index-1 of the primary's table, starting at the value its
// initializer gives. A slot's initial value must be one number (as
// Adagrad's accumulator and Adam's moments are), and must be set before
// the primary has rows.
//
// Eviction by steps_to_live and l2_weight_threshold runs when SaveV2
// saves the variable (kv_checkpoint.go, with KvResourceExport and
// KvResourceImportV2), or when a graph runs KvResourceEvict. Not here yet: KvResourceGather's
// is_use_default_value_tensor, double values.

func init() {
	registerOp("KvVarHandleOp", &Spec{Defaults: map[string]*tfpb.AttrValue{"container": stringAttr(""), "shared_name": stringAttr("")},
		Inputs: exactly(0), Types: kvVarTypes, NumOutputs: exactly(1), Build: buildKvVarHandle})
	registerOp("InitializeKvVariableOp", &Spec{Defaults: kvInitDefaults(), Inputs: exactly(4), Types: kvVarTypes, NumOutputs: exactly(0), Build: buildInitializeKvVariable})
	registerOp("KvVarIsInitializedOp", &Spec{Defaults: map[string]*tfpb.AttrValue{"dtype": typeAttr(wire.DTFloat)},
		Inputs: exactly(1), NumOutputs: exactly(1), Build: buildKvVarIsInitialized})
	registerOp("KvResourceGather", &Spec{Defaults: map[string]*tfpb.AttrValue{
		"is_use_default_value_tensor": boolAttr(false), "validate_indices": boolAttr(true), "is_inference": boolAttr(false),
	}, Inputs: exactly(3), Types: kvVarTypes, NumOutputs: exactly(1), Build: buildKvResourceGather})
	registerOp("KvResourceSparseApplyAdagrad", &Spec{Defaults: map[string]*tfpb.AttrValue{"use_locking": boolAttr(false)},
		Inputs: exactly(6), Types: kvUpdateTypes, NumOutputs: exactly(0), Build: buildKvSparseApplyAdagrad})
}

// kvVarTypes are the type attributes of KvVarHandleOp and the ops naming
// a variable's dtypes: its values' (float alone) and its keys'.
var kvVarTypes = []TypeAttr{typeIn("dtype", wire.DTFloat), typeIn("Tkeys", indexTypes...)}

// kvUpdateTypes are those of the optimizers' updates of a variable: the
// values', the indices' (its keys) and the global step's.
var kvUpdateTypes = []TypeAttr{typeIn("T", wire.DTFloat), typeIn("Tindices", indexTypes...), typeIn("Tstep", indexTypes...)}

// kvStepTypes are those of the ops on a variable at a global step
// (KvResourceEvict, KvResourceStreamExport): its keys' and the step's.
var kvStepTypes = []TypeAttr{typeIn("Tkeys", indexTypes...), typeIn("Tstep", indexTypes...)}

// kvInitDefaults are InitializeKvVariableOp's attribute defaults, as
// DeepRec declares them.
func kvInitDefaults() map[string]*tfpb.AttrValue {
	return map[string]*tfpb.AttrValue{
		"slot_num": intAttr(0), "initial_num_buckets": intAttr(131072), "max_load_factor": floatAttr(0.8),
		"steps_to_live": intAttr(0), "ht_type": stringAttr(""), "emb_index": intAttr(0), "block_num": intAttr(1),
		"slot_index": intAttr(0), "ht_partition_num": intAttr(1000), "filter_freq": intAttr(0), "max_freq": intAttr(999999),
		"max_element_size": intAttr(0), "false_positive_probability": floatAttr(-1), "l2_weight_threshold": floatAttr(-1),
		"layout": stringAttr(""), "storage_type": intAttr(0), "storage_path": stringAttr("."),
		"storage_size":      {Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{}}},
		"default_value_dim": intAttr(4096), "default_value_no_permission": floatAttr(0),
		"record_freq": boolAttr(false), "record_version": boolAttr(false),
	}
}

// A kvVar is an embedding variable's handle: a primary, whose table it
// makes when initialized, or a slot of another's table.
type kvVar struct {
	name    string // container/shared_name, for messages
	keyType wire.DataType
	dim     int

	mu       sync.Mutex
	table    *embedding.Table // a primary's, once initialized
	slotInit []float32        // a primary's slots' initial values, set before its table
	primary  *kvVar           // a slot's primary
	slot     int              // a slot's index in its primary's table
	init     bool
	// For eviction at save time (SaveV2 with has_ev).
	stepsToLive int64
	minL2       float64
	// A primary's slots as KvResourceImportV2 named them, so that the
	// primary's import reads them too, whichever import runs first, and
	// the checkpoint its rows were last imported from.
	slotsSaved   map[int]kvSlotSaved
	restoredFrom string
	// For increments (kv_incremental.go): the base name of the last
	// checkpoint applied, full or increment, and the slots' increments
	// staged for the primary's import.
	applied   string
	incrSlots map[int]kvSlotSaved
}

func (v *kvVar) resourceName() string { return v.name }

// wantKeys refuses a node whose key dtype, dt, is not v's.
func (v *kvVar) wantKeys(dt wire.DataType) error {
	if dt != v.keyType {
		return status.Errorf(wire.InvalidArgument, "embedding variable %s takes %v keys, the node gives %v", v.name, v.keyType, dt)
	}
	return nil
}

// kvTable returns the table a variable's rows are in, and the slot of it
// the variable is (-1 for a primary).
func (v *kvVar) kvTable() (*embedding.Table, int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.init {
		return nil, 0, status.Errorf(wire.FailedPrecondition, "embedding variable %s is not initialized", v.name)
	}
	if v.primary == nil {
		return v.table, -1, nil
	}
	t, _, err := v.primary.kvTable()
	return t, v.slot, err
}

// kvVarAttrs reads what KvVarHandleOp and the ops using a variable name
// of it: its key dtype, which their specs declare in kvVarTypes, and,
// from shape, its dimension.
func kvVarAttrs(n *Node, withShape bool) (keyType wire.DataType, dim int, err error) {
	keyType = n.typeOf("Tkeys")
	if !withShape {
		return keyType, 0, nil
	}
	shape, err := n.attrShape("shape")
	if err != nil {
		return 0, 0, err
	}
	if len(shape) != 1 || shape[0] <= 0 {
		return 0, 0, status.Errorf(wire.InvalidArgument, "KvVariable dimension must be 1, shape is %v", tfShape(shape))
	}
	return keyType, int(shape[0]), nil
}

func buildKvVarHandle(env *Env, n *Node) (Kernel, error) {
	keyType, dim, err := kvVarAttrs(n, true)
	if err != nil {
		return nil, err
	}
	container, err := n.attrString("container")
	if err != nil {
		return nil, err
	}
	shared, err := n.attrString("shared_name")
	if err != nil {
		return nil, err
	}
	if shared == "" {
		shared = n.Name
	}
	name := container + "/" + shared
	return func(c *Context) error {
		r, err := env.Vars.tables.lookupOrCreateResource("kv", container, shared, func() (resource, error) {
			return &kvVar{name: name, keyType: keyType, dim: dim}, nil
		})
		if err != nil {
			return err
		}
		v := r.(*kvVar)
		if v.keyType != keyType || v.dim != dim {
			return status.Errorf(wire.InvalidArgument, "embedding variable %s has %v keys and rows of %d, the node asks for %v and %d", name, v.keyType, v.dim, keyType, dim)
		}
		c.Out[0] = Value{T: wire.Tensor{DType: wire.DTResource}, Set: true, res: v}
		return nil
	}, nil
}

// kvVarKeyed returns the embedding variable input i refers to, refused
// unless its keys are of keyType.
func (c *Context) kvVarKeyed(i int, keyType wire.DataType) (*kvVar, error) {
	v, err := c.kvVarInput(i)
	if err != nil {
		return nil, err
	}
	if err := v.wantKeys(keyType); err != nil {
		return nil, err
	}
	return v, nil
}

// globalStep is input i, a scalar global step of dtype dt.
func (c *Context) globalStep(i int, dt wire.DataType) (*wire.Tensor, error) {
	step, err := c.typed(i, dt)
	if err != nil {
		return nil, err
	}
	if len(step.Shape) != 0 {
		return nil, status.Errorf(wire.InvalidArgument, "global_step must be a scalar, is %v", tfShape(step.Shape))
	}
	return step, nil
}

// kvVarInput returns the embedding variable input i refers to.
func (c *Context) kvVarInput(i int) (*kvVar, error) {
	v, ok := c.In[i].res.(*kvVar)
	if !ok {
		return nil, status.Errorf(wire.InvalidArgument, "input %d is not an embedding variable handle", i)
	}
	return v, nil
}

// A kvInit is what InitializeKvVariableOp's attributes ask of a table.
type kvInit struct {
	slotNum, slotIndex int
	opts               embedding.Options
	stepsToLive        int64
	minL2              float64
}

func kvInitAttrs(n *Node) (kvInit, error) {
	var k kvInit
	var slotNum, slotIndex, filterFreq, maxElements int64
	for name, p := range map[string]*int64{"slot_num": &slotNum, "slot_index": &slotIndex, "filter_freq": &filterFreq,
		"max_element_size": &maxElements, "steps_to_live": &k.stepsToLive} {
		v, err := n.attrInt(name)
		if err != nil {
			return k, err
		}
		*p = v
	}
	if k.stepsToLive < 0 {
		return k, status.Errorf(wire.InvalidArgument, "steps_to_live must >= 0, %d", k.stepsToLive)
	}
	if storage, _ := n.attrInt("storage_type"); storage != 0 {
		return k, status.Errorf(wire.Unimplemented, "storage_type %d: only memory (0) is supported", storage)
	}
	fp, err := attrValue[*tfpb.AttrValue_F](n, "false_positive_probability", "a float")
	if err != nil {
		return k, err
	}
	l2, err := attrValue[*tfpb.AttrValue_F](n, "l2_weight_threshold", "a float")
	if err != nil {
		return k, err
	}
	k.minL2 = float64(l2.F)
	k.slotNum, k.slotIndex = int(slotNum), int(slotIndex)
	k.opts.FilterFreq = max(filterFreq, 0) // DeepRec disables a negative filter
	if fp.F > 0 && maxElements > 0 && filterFreq > 1 {
		b, err := embedding.BloomFilterFor(int(maxElements), float64(fp.F))
		if err != nil {
			return k, status.Errorf(wire.InvalidArgument, "%v", err)
		}
		k.opts.Bloom = &b
	}
	return k, nil
}

func buildInitializeKvVariable(_ *Env, n *Node) (Kernel, error) {
	keyType, _, err := kvVarAttrs(n, true)
	if err != nil {
		return nil, err
	}
	k, err := kvInitAttrs(n)
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		self, err := c.kvVarKeyed(0, keyType)
		if err != nil {
			return err
		}
		primary, err := c.kvVarInput(1)
		if err != nil {
			return err
		}
		value, err := c.typed(2, wire.DTFloat)
		if err != nil {
			return err
		}
		if len(value.Shape) != 2 || value.Shape[1] != int64(self.dim) || value.Shape[0] < 1 {
			return status.Errorf(wire.InvalidArgument, "embedding variable %s: default values %v, want [default_value_dim, %d]", self.name, tfShape(value.Shape), self.dim)
		}
		rows := tensor.View[float32](value.Data)
		if self == primary {
			return self.initPrimary(k, rows)
		}
		return self.initSlot(primary, k, rows)
	}, nil
}

// initPrimary makes v's table, its rows starting at the rows of the
// default value matrix.
func (v *kvVar) initPrimary(k kvInit, rows []float32) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.initPrimaryLocked(k, rows)
}

// initPrimaryLocked is initPrimary with v.mu held.
func (v *kvVar) initPrimaryLocked(k kvInit, rows []float32) error {
	if v.init {
		return nil // DeepRec's LookupOrCreate: a second initialization keeps the table
	}
	opts := k.opts
	opts.Dim = v.dim
	opts.Slots = make([]float32, max(k.slotNum, len(v.slotInit)))
	copy(opts.Slots, v.slotInit)
	opts.Init = embedding.Initializer{Rows: rows}
	t, err := embedding.New(opts)
	if err != nil {
		return status.Errorf(wire.InvalidArgument, "embedding variable %s: %v", v.name, err)
	}
	v.table, v.init, v.stepsToLive, v.minL2 = t, true, k.stepsToLive, k.minL2
	return nil
}

// initSlot makes v slot slot_index-1 of primary's table, starting at the
// one value of rows.
func (v *kvVar) initSlot(primary *kvVar, k kvInit, rows []float32) error {
	if primary.dim != v.dim || primary.keyType != v.keyType {
		return status.Errorf(wire.InvalidArgument, "embedding variable %s (%v keys, rows of %d) cannot be a slot of %s (%v keys, rows of %d)", v.name, v.keyType, v.dim, primary.name, primary.keyType, primary.dim)
	}
	slot := k.slotIndex - 1
	if slot < 0 {
		return status.Errorf(wire.InvalidArgument, "embedding variable %s: slot_index %d of primary %s, want 1 or more", v.name, k.slotIndex, primary.name)
	}
	v.mu.Lock()
	again := v.init && v.primary == primary && v.slot == slot
	v.mu.Unlock()
	if again {
		return nil // as a primary's: a second initialization keeps the slot
	}
	if slices.ContainsFunc(rows, func(x float32) bool { return x != rows[0] }) {
		return status.Errorf(wire.Unimplemented, "embedding variable %s: slot initial values that vary by row", v.name)
	}
	primary.mu.Lock()
	var err error
	if primary.table != nil {
		if err = primary.table.SetSlotInit(slot, rows[0]); errors.Is(err, embedding.ErrNotEmpty) {
			err = status.Errorf(wire.FailedPrecondition, "embedding variable %s: slot initialized after %s has rows", v.name, primary.name)
		} else if err != nil {
			err = status.Errorf(wire.InvalidArgument, "embedding variable %s: slot %d of %s: %v", v.name, slot, primary.name, err)
		}
	} else {
		for len(primary.slotInit) <= slot {
			primary.slotInit = append(primary.slotInit, 0)
		}
		primary.slotInit[slot] = rows[0]
	}
	primary.mu.Unlock()
	if err != nil {
		return err
	}
	v.mu.Lock()
	v.primary, v.slot, v.init = primary, slot, true
	v.mu.Unlock()
	return nil
}

func buildKvVarIsInitialized(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		v, err := c.kvVarInput(0)
		if err != nil {
			return err
		}
		v.mu.Lock()
		init := v.init
		v.mu.Unlock()
		r, _ := tensor.New(wire.DTBool, nil)
		r.Data[0] = 0
		if init {
			r.Data[0] = 1
		}
		c.setOut(0, r)
		return nil
	}, nil
}

// kvIDs returns ids as int64s: a view of int64 ids, a copy of int32 ones.
func kvIDs(t *wire.Tensor) []int64 {
	if t.DType == wire.DTInt64 {
		return tensor.View[int64](t.Data)
	}
	v := tensor.View[int32](t.Data)
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func buildKvResourceGather(_ *Env, n *Node) (Kernel, error) {
	keyType, _, err := kvVarAttrs(n, false)
	if err != nil {
		return nil, err
	}
	if useTensor, err := n.attrBool("is_use_default_value_tensor"); err != nil || useTensor {
		return nil, errors.Join(err, status.Errorf(wire.Unimplemented, "is_use_default_value_tensor is not supported"))
	}
	// An inference's lookup makes no row and counts no lookup.
	inference, err := n.attrBool("is_inference")
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		v, err := c.kvVarKeyed(0, keyType)
		if err != nil {
			return err
		}
		ids, err := c.typed(1, keyType)
		if err != nil {
			return err
		}
		t, slot, err := v.kvTable()
		if err != nil {
			return err
		}
		if slot >= 0 {
			return status.Errorf(wire.InvalidArgument, "embedding variable %s is a slot; gather its primary", v.name)
		}
		out, err := tensor.New(wire.DTFloat, append(slices.Clone(ids.Shape), int64(v.dim)))
		if err != nil {
			return err
		}
		lookup := t.Gather
		if inference {
			lookup = t.Find
		}
		if err := lookup(kvIDs(ids), tensor.View[float32](out.Data)); err != nil {
			out.Buf.Release()
			return status.Errorf(wire.InvalidArgument, "embedding variable %s: %v", v.name, err)
		}
		c.setOut(0, out)
		return nil
	}, nil
}

// buildKvSparseApplyAdagrad builds KvResourceSparseApplyAdagrad(var,
// accum, lr, grad, indices, global_step): SparseApplyAdagrad on the rows
// of indices, accum being a slot of var, each row's version becoming
// global_step. Gradients of ids not admitted are dropped.
func buildKvSparseApplyAdagrad(_ *Env, n *Node) (Kernel, error) {
	keyType, stepType := n.typeOf("Tindices"), n.typeOf("Tstep")
	return func(c *Context) error {
		v, err := c.kvVarKeyed(0, keyType)
		if err != nil {
			return err
		}
		acc, err := c.kvVarInput(1)
		if err != nil {
			return err
		}
		var in [4]*wire.Tensor
		for i, dt := range []wire.DataType{wire.DTFloat, wire.DTFloat, keyType, stepType} {
			if in[i], err = c.typed(2+i, dt); err != nil {
				return err
			}
		}
		lr, grad, ids, step := in[0], in[1], in[2], in[3]
		if len(lr.Shape) != 0 || len(step.Shape) != 0 {
			return status.Errorf(wire.InvalidArgument, "lr and global_step must be scalars, are %v and %v", tfShape(lr.Shape), tfShape(step.Shape))
		}
		if len(ids.Shape) != 1 || !slices.Equal(grad.Shape, []int64{ids.Shape[0], int64(v.dim)}) {
			return status.Errorf(wire.InvalidArgument, "embedding variable %s: grad %v for indices %v, want [%d,%d]", v.name, tfShape(grad.Shape), tfShape(ids.Shape), ids.Shape[0], v.dim)
		}
		t, _, err := v.kvTable()
		if err != nil {
			return err
		}
		at, slot, err := acc.kvTable()
		if err != nil {
			return err
		}
		if at != t || slot < 0 {
			return status.Errorf(wire.InvalidArgument, "accumulator %s is not a slot of embedding variable %s", acc.name, v.name)
		}
		gs, _ := indices(step)
		if _, err := t.ApplyAdagradSlot(slot, kvIDs(ids), tensor.View[float32](grad.Data), tensor.View[float32](lr.Data)[0], gs[0]); err != nil {
			return status.Errorf(wire.InvalidArgument, "embedding variable %s: %v", v.name, err)
		}
		return nil
	}, nil
}
