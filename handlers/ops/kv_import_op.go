package ops

import (
	"path/filepath"
	"slices"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/embedding"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	importDefaults := kvInitDefaults()
	for name, v := range map[string]*tfpb.AttrValue{"partition_id": intAttr(0), "partition_num": intAttr(1), "reset_version": boolAttr(false)} {
		importDefaults[name] = v
	}
	registerOp("KvResourceImportV2", &Spec{Defaults: importDefaults, Inputs: exactly(6), Types: kvVarTypes, NumOutputs: exactly(0), Build: buildKvResourceImportV2})
	registerOp("KvResourceExport", &Spec{Inputs: exactly(1), Types: []TypeAttr{typeIn("Tkeys", indexTypes...), typeIn("Tvalues", wire.DTFloat)},
		Build: buildKvResourceExport, Outputs: []string{"keys", "values", "versions", "freqs"}})
}

// A kvSlotSaved is a slot variable a primary's import reads.
type kvSlotSaved struct {
	v    *kvVar
	name string // its tensors' name in the checkpoint
	path string // for an increment's slot, the increment's
}

// A kvImport is what one KvResourceImportV2 node asks.
type kvImport struct {
	keyType      wire.DataType
	init         kvInit
	partID       int
	partNum      int
	resetVersion bool
	root         string
}

func kvImportAttrs(env *Env, n *Node) (*kvImport, error) {
	keyType, _, err := kvVarAttrs(n, true)
	if err != nil {
		return nil, err
	}
	init, err := kvInitAttrs(n)
	if err != nil {
		return nil, err
	}
	id, num, err := kvPartitionAttrs(n)
	if err != nil {
		return nil, err
	}
	reset, err := n.attrBool("reset_version")
	if err != nil {
		return nil, err
	}
	root, err := checkpointRoot(env.CheckpointDir)
	if err != nil {
		return nil, err
	}
	return &kvImport{keyType: keyType, init: init, partID: int(id), partNum: int(num), resetVersion: reset, root: root}, nil
}

// buildKvResourceImportV2 builds KvResourceImportV2(prefix, resource_self,
// resource_primary, value, tensor_names, empty_key): the variable
// initialized as InitializeKvVariableOp would, then its rows of
// partition_id of partition_num read from the checkpoint under prefix,
// tensor_names being its name there. A primary's import replaces its rows,
// with the slots whose imports ran already; a slot's import, after its
// primary's, sets the slot of every row, and before it leaves the slot to
// the primary's. A refused import leaves the primary uninitialized, so
// that nothing half restored serves.
func buildKvResourceImportV2(env *Env, n *Node) (Kernel, error) {
	imp, err := kvImportAttrs(env, n)
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		self, err := c.kvVarInput(1)
		if err != nil {
			return err
		}
		primary, err := c.kvVarInput(2)
		if err != nil {
			return err
		}
		if err := self.wantKeys(imp.keyType); err != nil {
			return err
		}
		defaults, err := kvDefaultValues(c, 3, self)
		if err != nil {
			return err
		}
		k, name, path, err := imp.open(c, self, 0, 4)
		if err != nil {
			return err
		}
		defer k.r.Close()
		if self == primary {
			return self.importPrimary(imp, defaults, k, name, path)
		}
		return self.importSlot(primary, imp, defaults, k, name, path)
	}, nil
}

// kvDefaultValues reads input i, a variable's default value matrix.
func kvDefaultValues(c *Context, i int, v *kvVar) ([]float32, error) {
	value, err := c.typed(i, wire.DTFloat)
	if err != nil {
		return nil, err
	}
	if len(value.Shape) != 2 || value.Shape[1] != int64(v.dim) || value.Shape[0] < 1 {
		return nil, status.Errorf(wire.InvalidArgument, "embedding variable %s: default values %v, want [default_value_dim, %d]", v.name, tfShape(value.Shape), v.dim)
	}
	return tensor.View[float32](value.Data), nil
}

// importPrimary replaces v's rows with the checkpoint's.
func (v *kvVar) importPrimary(imp *kvImport, defaults []float32, k *kvReader, name, path string) error {
	s, err := k.rows(name, imp.partID, imp.partNum)
	if err != nil {
		return err
	}
	if imp.resetVersion {
		clear(s.Versions)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.initPrimaryLocked(imp.init, defaults); err != nil {
		return err
	}
	if err := v.fillSlots(s, imp, k, path); err != nil {
		v.poisonLocked()
		return err
	}
	if err := v.table.Restore(s); err != nil {
		v.poisonLocked()
		return status.Errorf(wire.InvalidArgument, "embedding variable %s: checkpoint %s: %v", v.name, k.prefix, err)
	}
	v.restoredFrom, v.applied = path, filepath.Base(path)
	return nil
}

// fillSlots sets s's slots: the rows of the slots whose imports from path
// ran, matched by id, and the others' initial values. v.mu is held.
func (v *kvVar) fillSlots(s *embedding.Snapshot, imp *kvImport, k *kvReader, path string) error {
	d := v.dim
	s.Slots = make([][]float32, v.table.Slots())
	for slot := range s.Slots {
		saved, ok := v.slotsSaved[slot]
		if !ok || saved.name == "" {
			s.Slots[slot] = slices.Repeat([]float32{v.table.SlotInit(slot)}, len(s.IDs)*d)
			continue
		}
		sk := &kvReader{r: k.r, prefix: k.prefix, v: saved.v}
		vals, err := sk.alignedRows(saved.name, v.name, s.IDs, imp)
		if err != nil {
			return err
		}
		s.Slots[slot] = vals
	}
	return nil
}

// alignedRows reads the slot saved as name, of the primary named
// primary, and returns its rows in the order of ids, which must be the
// slot's keys.
func (k *kvReader) alignedRows(name, primary string, ids []int64, imp *kvImport) ([]float32, error) {
	d := k.v.dim
	rows, err := k.rows(name, imp.partID, imp.partNum)
	if err != nil {
		return nil, err
	}
	if slices.Equal(rows.IDs, ids) {
		// Saved in the primary's order, as SaveV2 saves them: no need to
		// match them up by id.
		return rows.Values, nil
	}
	at := make(map[int64]int, len(rows.IDs))
	for i, id := range rows.IDs {
		at[id] = i
	}
	if len(at) != len(ids) {
		return nil, k.errorf(wire.InvalidArgument, "%q holds %d keys, %s has %d rows", name+kvKeys, len(at), primary, len(ids))
	}
	vals := make([]float32, len(ids)*d)
	for i, id := range ids {
		j, ok := at[id]
		if !ok {
			return nil, k.errorf(wire.InvalidArgument, "key %d of %s has no row in %q", id, primary, name+kvKeys)
		}
		copy(vals[i*d:(i+1)*d], rows.Values[j*d:(j+1)*d])
	}
	return vals, nil
}

// poisonLocked leaves v, a primary, uninitialized after a refused import,
// keeping its slots' initial values for the next initialization; v.mu is
// held.
func (v *kvVar) poisonLocked() {
	if v.table != nil {
		v.slotInit = make([]float32, v.table.Slots())
		for k := range v.slotInit {
			v.slotInit[k] = v.table.SlotInit(k)
		}
	}
	v.table, v.init, v.restoredFrom, v.applied = nil, false, "", ""
}

// importSlot makes v a slot of primary and sets its values from the
// checkpoint, or leaves them to primary's import when that has not run.
func (v *kvVar) importSlot(primary *kvVar, imp *kvImport, defaults []float32, k *kvReader, name, path string) error {
	if err := v.bindSlot(primary, imp.init, defaults); err != nil {
		return err
	}
	s, err := k.rows(name, imp.partID, imp.partNum)
	if err != nil {
		primary.poison()
		return err
	}
	primary.mu.Lock()
	defer primary.mu.Unlock()
	if primary.slotsSaved == nil {
		primary.slotsSaved = map[int]kvSlotSaved{}
	}
	primary.slotsSaved[v.slot] = kvSlotSaved{v: v, name: name}
	if !primary.init || primary.restoredFrom != path {
		return nil // the primary's import reads it
	}
	if err := primary.table.RestoreSlot(v.slot, s.IDs, s.Values); err != nil {
		primary.poisonLocked()
		return status.Errorf(wire.InvalidArgument, "embedding variable %s: checkpoint %s: slot of %s: %v", v.name, k.prefix, primary.name, err)
	}
	return nil
}

func (v *kvVar) poison() {
	v.mu.Lock()
	v.poisonLocked()
	v.mu.Unlock()
}

// bindSlot makes v slot slot_index-1 of primary, as InitializeKvVariableOp
// does, unless it is already; a primary with rows keeps its slots'
// initial values, since an import sets the slot of every row.
func (v *kvVar) bindSlot(primary *kvVar, k kvInit, defaults []float32) error {
	v.mu.Lock()
	bound := v.init && v.primary == primary && v.slot == k.slotIndex-1
	v.mu.Unlock()
	if bound {
		return nil
	}
	primary.mu.Lock()
	hasRows := primary.table != nil && primary.table.Len() > 0
	primary.mu.Unlock()
	if !hasRows {
		return v.initSlot(primary, k, defaults)
	}
	if k.slotIndex < 1 {
		return status.Errorf(wire.InvalidArgument, "embedding variable %s: slot_index %d of primary %s, want 1 or more", v.name, k.slotIndex, primary.name)
	}
	v.mu.Lock()
	v.primary, v.slot, v.init = primary, k.slotIndex-1, true
	v.mu.Unlock()
	return nil
}

// buildKvResourceExport builds KvResourceExport(resource_handle): the
// keys, values (a slot's, for a slot), versions and freqs of one snapshot
// of the variable's rows.
func buildKvResourceExport(_ *Env, n *Node) (Kernel, error) {
	keyType := n.typeOf("Tkeys")
	return func(c *Context) error {
		v, err := c.kvVarInput(0)
		if err != nil {
			return err
		}
		if v.keyType != keyType {
			return status.Errorf(wire.InvalidArgument, "embedding variable %s has %v keys, Tkeys is %v", v.name, v.keyType, keyType)
		}
		t, slot, err := v.kvTable()
		if err != nil {
			return err
		}
		s := t.Snapshot()
		values := s.Values
		if slot >= 0 {
			values = s.Slots[slot]
		}
		n := int64(len(s.IDs))
		outs := []*wire.Tensor{keyTensor(keyType, s.IDs), bytesTensor(wire.DTFloat, values, n, int64(v.dim)),
			bytesTensor(wire.DTInt64, s.Versions, n), bytesTensor(wire.DTInt64, s.Freqs, n)}
		for i, o := range outs {
			c.setOut(i, tensor.Copy(o))
		}
		return nil
	}, nil
}

// open opens the checkpoint an import of v reads: its prefix is input
// pi, v's name in it input ni. The caller closes k.r.
func (imp *kvImport) open(c *Context, v *kvVar, pi, ni int) (k *kvReader, name, path string, err error) {
	var in [2]*wire.Tensor
	if in[0], err = c.input(pi); err != nil {
		return nil, "", "", err
	}
	if in[1], err = c.input(ni); err != nil {
		return nil, "", "", err
	}
	prefix, err := scalarString(in[0], "prefix")
	if err != nil {
		return nil, "", "", err
	}
	if name, err = scalarString(in[1], "tensor_names"); err != nil {
		return nil, "", "", err
	}
	if path, err = resolvePrefix(imp.root, prefix); err != nil {
		return nil, "", "", err
	}
	r, err := checkpoint.Open(path)
	if err != nil {
		return nil, "", "", checkpointError(prefix, err)
	}
	return &kvReader{r: r, prefix: prefix, v: v}, name, path, nil
}

// kvPartitionAttrs reads an import's partition_id and partition_num: which
// of how many partitions of the variable this ps holds.
func kvPartitionAttrs(n *Node) (id, num int64, err error) {
	if id, err = n.attrInt("partition_id"); err != nil {
		return 0, 0, err
	}
	if num, err = n.attrInt("partition_num"); err != nil {
		return 0, 0, err
	}
	if num < 1 || id < 0 || id >= num {
		return 0, 0, status.Errorf(wire.InvalidArgument, "partition_id %d of partition_num %d", id, num)
	}
	return id, num, nil
}
