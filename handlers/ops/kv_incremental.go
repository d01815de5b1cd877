package ops

import (
	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/embedding"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// Incremental checkpoints of embedding variables. Between full
// checkpoints, IncrSave saves of each embedding variable only the rows
// updated at a version since or later (embedding.Table.ChangedSince),
// under the names a full save uses (N-keys, N-values, N-freqs,
// N-versions, N-partition_offset, ...: kv_checkpoint.go), and every other
// tensor in full, as SaveV2 does. With them each variable's increment
// carries where it belongs:
//
//	N-incr_base   string: the base name of the full checkpoint it builds on
//	N-incr_prev   string: the base name of the checkpoint saved just before
//	              it, the full one or the previous increment
//	N-incr_since  int64: the version its rows were taken from
//
// KvResourceIncrImport applies one increment to a variable restored from
// a full checkpoint (KvResourceImportV2), through embedding.Table.Apply:
// an increment whose base is not the checkpoint the variable was restored
// from, or whose prev is not the last checkpoint applied to it (one out of
// order, or skipped), is refused with FailedPrecondition before anything
// changes. A restore thus applies the newest full checkpoint and then
// every later increment of it, oldest first.
//
// IncrSave evicts nothing: rows are evicted at full saves alone, so that
// no row an increment leaves out was removed since its base.

const (
	kvIncrBase  = "-incr_base"
	kvIncrPrev  = "-incr_prev"
	kvIncrSince = "-incr_since"
)

func init() {
	// SaveV2's inputs, then base, prev and since.
	registerOp("IncrSave", &Spec{Inputs: byList("dtypes").plus(6), NumOutputs: exactly(0), Build: buildIncrSave})
	registerOp("KvResourceIncrImport", &Spec{
		Defaults: map[string]*tfpb.AttrValue{"partition_id": intAttr(0), "partition_num": intAttr(1)},
		Inputs:   exactly(4), Types: kvVarTypes, NumOutputs: exactly(0), Build: buildKvResourceIncrImport,
	})
}

// An incrHeader is what an increment says of its place.
type incrHeader struct {
	base, prev string
	since      int64
}

// buildIncrSave builds IncrSave(prefix, tensor_names, shape_and_slices,
// base, prev, since, tensors...): one increment under prefix, its
// embedding variables (tensors of dtype resource) as their rows changed
// since the version since, the other tensors in full.
func buildIncrSave(env *Env, n *Node) (Kernel, error) {
	dtypes := n.typesOf("dtypes")
	root, err := checkpointRoot(env.CheckpointDir)
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		ts, err := saveInputs(c, 6, dtypes)
		if err != nil {
			return err
		}
		target, err := resolveCheckpoint(root, ts[:3], len(dtypes))
		if err != nil {
			return err
		}
		h, err := incrHeaderOf(ts[3:6])
		if err != nil {
			return err
		}
		return writeSave(c, &target, dtypes, ts, 6, func(w *checkpoint.Writer, kv map[*embedding.Table]*kvSaved, name string, res resource) error {
			return saveKvIncr(w, kv, target.prefix, name, res, h)
		})
	}, nil
}

// incrHeaderOf reads IncrSave's base, prev and since.
func incrHeaderOf(ts []*wire.Tensor) (incrHeader, error) {
	var h incrHeader
	var err error
	if h.base, err = scalarString(ts[0], "base"); err != nil {
		return h, err
	}
	if h.prev, err = scalarString(ts[1], "prev"); err != nil {
		return h, err
	}
	if h.base == "" || h.prev == "" {
		return h, status.Errorf(wire.InvalidArgument, "IncrSave: base %q and prev %q must name checkpoints", h.base, h.prev)
	}
	if ts[2].DType != wire.DTInt64 || !legacyScalar(ts[2]) {
		return h, status.Errorf(wire.InvalidArgument, "since must be an int64 scalar, is %v%v", ts[2].DType, ts[2].Shape)
	}
	v, _ := indices(ts[2])
	h.since = v[0]
	return h, nil
}

// saveKvIncr writes the rows of the embedding variable res changed since
// h.since under name, with the increment's header.
func saveKvIncr(w *checkpoint.Writer, cache map[*embedding.Table]*kvSaved, prefix, name string, res resource, h incrHeader) error {
	v, ok := res.(*kvVar)
	if !ok {
		return status.Errorf(wire.InvalidArgument, "tensor %q: a resource handle that is not an embedding variable", name)
	}
	t, slot, err := v.kvTable()
	if err != nil {
		return err
	}
	s, ok := cache[t]
	if !ok {
		s = &kvSaved{snap: t.ChangedSince(h.since)}
		s.offsets, s.filteredOffsets = s.snap.Partition()
		cache[t] = s
	}
	err = writeKv(w, name, v, slot, s)
	for _, x := range []struct {
		suffix string
		t      *wire.Tensor
	}{
		{kvIncrBase, stringScalar(h.base)},
		{kvIncrPrev, stringScalar(h.prev)},
		{kvIncrSince, bytesTensor(wire.DTInt64, []int64{h.since})},
	} {
		if err == nil {
			err = w.Add(name+x.suffix, x.t)
		}
	}
	if err != nil {
		return checkpointError(prefix, err)
	}
	return nil
}

// stringScalar is s as a string scalar tensor.
func stringScalar(s string) *wire.Tensor {
	return &wire.Tensor{DType: wire.DTString, Data: wire.AppendStrings(nil, [][]byte{[]byte(s)})}
}
