package ops

import (
	"path/filepath"

	"github.com/starwire/starwire/handlers/embedding"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// buildKvResourceIncrImport builds KvResourceIncrImport(prefix,
// resource_self, resource_primary, tensor_names): the rows of partition_id
// of partition_num of the increment under prefix, tensor_names being the
// variable's name there, applied to the variable (kv_incremental.go). A
// slot's import names the slot's tensors for its primary's, which must
// run after it and applies values and slots of every row at once.
func buildKvResourceIncrImport(env *Env, n *Node) (Kernel, error) {
	keyType, _, err := kvVarAttrs(n, false)
	if err != nil {
		return nil, err
	}
	id, num, err := kvPartitionAttrs(n)
	if err != nil {
		return nil, err
	}
	root, err := checkpointRoot(env.CheckpointDir)
	if err != nil {
		return nil, err
	}
	imp := &kvImport{keyType: keyType, partID: int(id), partNum: int(num), root: root}
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
		k, name, path, err := imp.open(c, self, 0, 3)
		if err != nil {
			return err
		}
		defer k.r.Close()
		if self == primary {
			return self.applyIncrement(imp, k, name, path)
		}
		return self.stageIncrSlot(primary, k, name, path)
	}, nil
}

// stageIncrSlot names v's tensors in the increment at path for its
// primary's import.
func (v *kvVar) stageIncrSlot(primary *kvVar, k *kvReader, name, path string) error {
	v.mu.Lock()
	bound, slot := v.init && v.primary == primary, v.slot
	v.mu.Unlock()
	if !bound {
		return status.Errorf(wire.FailedPrecondition, "embedding variable %s: increment %s: not a restored slot of %s", v.name, k.prefix, primary.name)
	}
	if _, err := k.header(name); err != nil {
		return err
	}
	primary.mu.Lock()
	defer primary.mu.Unlock()
	if primary.incrSlots == nil {
		primary.incrSlots = map[int]kvSlotSaved{}
	}
	primary.incrSlots[slot] = kvSlotSaved{v: v, name: name, path: path}
	return nil
}

// header reads the increment's header of the variable saved as name,
// from its first piece.
func (k *kvReader) header(name string) (incrHeader, error) {
	p := kvPieces(k.r, name)[0]
	var h incrHeader
	for _, x := range []struct {
		suffix string
		dst    *string
	}{{kvIncrBase, &h.base}, {kvIncrPrev, &h.prev}} {
		if _, ok := k.r.Entry(p + x.suffix); !ok {
			return h, k.errorf(wire.InvalidArgument, "tensor %q is not in the checkpoint: not an increment", p+x.suffix)
		}
		t, err := k.r.Read(p + x.suffix)
		if err != nil {
			return h, checkpointError(k.prefix, err)
		}
		if *x.dst, err = scalarString(&t, p+x.suffix); err != nil {
			return h, k.errorf(wire.DataLoss, "%v", err)
		}
	}
	since, err := k.vector(p+kvIncrSince, 1, false)
	if err != nil {
		return h, err
	}
	h.since = since[0]
	return h, nil
}

// applyIncrement applies the increment at path to v, a primary, with the
// slots its slots' imports staged.
func (v *kvVar) applyIncrement(imp *kvImport, k *kvReader, name, path string) error {
	h, err := k.header(name)
	if err != nil {
		return err
	}
	s, err := k.rows(name, imp.partID, imp.partNum)
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	defer func() { v.incrSlots = nil }()
	if v.table == nil || v.restoredFrom == "" {
		return k.errorf(wire.FailedPrecondition, "an increment applies to a variable restored from its base %s, and this one was not restored", h.base)
	}
	if base := filepath.Base(v.restoredFrom); base != h.base {
		return k.errorf(wire.FailedPrecondition, "the increment builds on %s, the variable was restored from %s", h.base, base)
	}
	if h.prev != v.applied {
		return k.errorf(wire.FailedPrecondition, "the increment follows %s, the last checkpoint applied is %s: out of order, or one is missing", h.prev, v.applied)
	}
	if err := v.incrSlotRows(s, imp, k, path); err != nil {
		return err
	}
	if err := v.table.Apply(s); err != nil {
		return k.errorf(wire.InvalidArgument, "%v", err)
	}
	v.applied = filepath.Base(path)
	return nil
}

// incrSlotRows sets s's slots from the slots' increments staged for path;
// v.mu is held.
func (v *kvVar) incrSlotRows(s *embedding.Snapshot, imp *kvImport, k *kvReader, path string) error {
	s.Slots = make([][]float32, v.table.Slots())
	for slot := range s.Slots {
		saved, ok := v.incrSlots[slot]
		if !ok || saved.path != path {
			return k.errorf(wire.FailedPrecondition, "slot %d's increment was not imported from %s before its primary's", slot, k.prefix)
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
