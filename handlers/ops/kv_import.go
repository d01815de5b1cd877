package ops

import (
	"fmt"
	"slices"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/embedding"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// A kvReader reads the pieces of embedding variables from one checkpoint,
// naming the variable and the tensor in its errors.
type kvReader struct {
	r      *checkpoint.Reader
	prefix string
	v      *kvVar
}

func (k *kvReader) errorf(code wire.Code, format string, args ...any) error {
	return status.Errorf(code, "embedding variable %s: checkpoint %s: %s", k.v.name, k.prefix, fmt.Sprintf(format, args...))
}

// read returns tensor name as a []T, and its shape; with optional, a
// tensor not in the checkpoint is nil, not an error.
func kvRead[T tensor.Elem](k *kvReader, name string, dt wire.DataType, optional bool) ([]T, []int64, error) {
	e, ok := k.r.Entry(name)
	if !ok {
		if optional {
			return nil, nil, nil
		}
		return nil, nil, k.errorf(wire.NotFound, "tensor %q is not in the checkpoint", name)
	}
	if e.DType != dt {
		return nil, nil, k.errorf(wire.InvalidArgument, "tensor %q is %v, want %v", name, e.DType, dt)
	}
	t, err := k.r.Read(name)
	if err != nil {
		return nil, nil, checkpointError(k.prefix, err)
	}
	n, _ := tensor.NumElements(t.Shape)
	out := make([]T, n)
	if len(tensor.Bytes(out)) != len(t.Data) {
		return nil, nil, k.errorf(wire.DataLoss, "tensor %q: %d bytes for shape %v", name, len(t.Data), tfShape(t.Shape))
	}
	copy(tensor.Bytes(out), t.Data)
	return out, t.Shape, nil
}

// kvKeysOf reads the key tensor name, of the variable's key dtype.
func (k *kvReader) keys(name string, optional bool) ([]int64, error) {
	if k.v.keyType == wire.DTInt64 {
		ids, _, err := kvRead[int64](k, name, wire.DTInt64, optional)
		return ids, err
	}
	ids32, _, err := kvRead[int32](k, name, wire.DTInt32, optional)
	if err != nil || ids32 == nil {
		return nil, err
	}
	ids := make([]int64, len(ids32))
	for i, id := range ids32 {
		ids[i] = int64(id)
	}
	return ids, nil
}

// vector reads the int64 vector name of n elements; a missing optional
// one is n zeros.
func (k *kvReader) vector(name string, n int, optional bool) ([]int64, error) {
	return k.vectorOr(name, n, optional, false)
}

// recorded reads a row's count or version, -freqs or -versions: missing
// or empty, it is n zeros. DeepRec saves them empty for a variable that
// records neither (no filter_freq and no record_freq; no steps_to_live
// and no record_version).
func (k *kvReader) recorded(name string, n int) ([]int64, error) {
	return k.vectorOr(name, n, true, true)
}

func (k *kvReader) vectorOr(name string, n int, optional, emptyIsNone bool) ([]int64, error) {
	v, _, err := kvRead[int64](k, name, wire.DTInt64, optional)
	switch {
	case err != nil:
		return nil, err
	case v == nil || emptyIsNone && len(v) == 0:
		return make([]int64, n), nil
	case len(v) != n:
		return nil, k.errorf(wire.InvalidArgument, "tensor %q holds %d elements for %d keys", name, len(v), n)
	}
	return v, nil
}

// offsets reads a partition offset tensor, nil when there is none.
func (k *kvReader) offsets(name string) ([]int32, error) {
	o, shape, err := kvRead[int32](k, name, wire.DTInt32, true)
	if err == nil && o != nil && len(shape) != 1 {
		err = k.errorf(wire.InvalidArgument, "tensor %q is %v, want a vector", name, tfShape(shape))
	}
	return o, err
}

// piece reads the piece saved under name and appends the rows of
// partition id of num to dst, its values (or the slot's) as dst's.
func (k *kvReader) piece(dst *embedding.Snapshot, name string, id, num int) error {
	ids, err := k.keys(name+kvKeys, false)
	if err != nil {
		return err
	}
	n := len(ids)
	values, shape, err := kvRead[float32](k, name+kvValues, wire.DTFloat, false)
	if err != nil {
		return err
	}
	if !slices.Equal(shape, []int64{int64(n), int64(k.v.dim)}) {
		return k.errorf(wire.InvalidArgument, "tensor %q is %v, want [%d,%d] for %d keys of rows of %d", name+kvValues, tfShape(shape), n, k.v.dim, n, k.v.dim)
	}
	piece := &embedding.Snapshot{Dim: k.v.dim, IDs: ids, Values: values}
	if piece.Freqs, err = k.recorded(name+kvFreqs, n); err != nil {
		return err
	}
	if piece.Versions, err = k.recorded(name+kvVersions, n); err != nil {
		return err
	}
	if piece.FilteredIDs, err = k.keys(name+kvKeysFiltered, true); err != nil {
		return err
	}
	if piece.FilteredFreqs, err = k.vector(name+kvFreqsFiltered, len(piece.FilteredIDs), true); err != nil {
		return err
	}
	offsets, err := k.offsets(name + kvOffsets)
	if err != nil {
		return err
	}
	filtered, err := k.offsets(name + kvFilterOffsets)
	if err != nil {
		return err
	}
	if err := piece.Select(dst, offsets, filtered, id, num); err != nil {
		return k.errorf(wire.InvalidArgument, "%q: %v", name, err)
	}
	return k.bloom(dst, name)
}

// bloom adds the Bloom filter counters saved with the piece name to
// dst's: a restore from several pieces takes the counters of all.
func (k *kvReader) bloom(dst *embedding.Snapshot, name string) error {
	counts, _, err := kvRead[uint8](k, name+kvBloom, wire.DTUint8, true)
	switch {
	case err != nil || counts == nil:
		return err
	case dst.Bloom == nil:
		dst.Bloom = counts
	case len(dst.Bloom) != len(counts):
		return k.errorf(wire.InvalidArgument, "tensor %q holds %d counters, another piece %d", name+kvBloom, len(counts), len(dst.Bloom))
	default:
		embedding.MergeBloom(dst.Bloom, counts)
	}
	return nil
}

// rows reads the rows of partition id of num of the variable saved as
// name, from every piece the checkpoint holds of it.
func (k *kvReader) rows(name string, id, num int) (*embedding.Snapshot, error) {
	s := &embedding.Snapshot{Dim: k.v.dim}
	for _, p := range kvPieces(k.r, name) {
		if err := k.piece(s, p, id, num); err != nil {
			return nil, err
		}
	}
	return s, nil
}
