package ops

import (
	"strings"
	"sync"
	"unsafe"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/internal/idindex"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// A tableKey is how a table holds its keys: int32 and int64 keys as
// int64, string keys as strings.
type tableKey interface{ int64 | string }

// A keyCodec reads a table's keys out of a tensor and writes them back
// into one, for the key dtype of its table. Reading costs no allocation:
// keys are viewed in the tensor's memory (strings too, which own copies
// only when a table keeps them).
type keyCodec[K tableKey] struct {
	// read views t's keys in s and returns how many there are.
	read func(t *wire.Tensor, s *keyScratch) (int, error)
	// at returns key i of what read viewed.
	at func(s *keyScratch, i int) K
	// own returns a copy of k that outlives the tensor it was read from.
	own func(k K) K
	// hash is TensorFlow's hash of one key element (see tfhash.go).
	hash func(k K) uint64
	// encode returns a tensor of the key dtype and shape holding keys.
	encode func(keys []K, shape []int64) (wire.Tensor, error)
	// spread is the hash a MutableHashTable spreads its keys by, over its
	// shards by the high bits and over a shard's index by the low.
	spread func(k K) uint64
	// index returns an empty index of keys with room for n of them.
	index func(n int) keyIndex[K]
}

// A keyScratch holds the views of one kernel call's keys.
type keyScratch struct {
	i32  []int32
	i64  []int64
	strs [][]byte
}

var keyScratches = sync.Pool{New: func() any { return new(keyScratch) }}

func getKeyScratch() *keyScratch { return keyScratches.Get().(*keyScratch) }

// put returns s to the pool without the views, which refer to a step's
// tensors.
func (s *keyScratch) put() {
	s.i32, s.i64 = nil, nil
	clear(s.strs)
	s.strs = s.strs[:0]
	keyScratches.Put(s)
}

// intKeys is the codec of int32 (wide false) or int64 keys.
func intKeys(dt wire.DataType) keyCodec[int64] {
	c := keyCodec[int64]{
		index:  newIntIndex,
		spread: func(k int64) uint64 { return idindex.Hash(uint64(k)) },
		own:    func(k int64) int64 { return k },
		hash:   func(k int64) uint64 { return uint64(k) },
		encode: func(keys []int64, shape []int64) (wire.Tensor, error) {
			t, err := tensor.New(dt, shape)
			if err != nil {
				return t, err
			}
			if dt == wire.DTInt32 {
				out := tensor.View[int32](t.Data)
				for i, k := range keys {
					out[i] = int32(k)
				}
			} else {
				copy(tensor.View[int64](t.Data), keys)
			}
			return t, nil
		},
	}
	if dt == wire.DTInt32 {
		c.read = func(t *wire.Tensor, s *keyScratch) (int, error) {
			s.i32 = tensor.View[int32](t.Data)
			return len(s.i32), nil
		}
		c.at = func(s *keyScratch, i int) int64 { return int64(s.i32[i]) }
	} else {
		c.read = func(t *wire.Tensor, s *keyScratch) (int, error) {
			s.i64 = tensor.View[int64](t.Data)
			return len(s.i64), nil
		}
		c.at = func(s *keyScratch, i int) int64 { return s.i64[i] }
	}
	return c
}

// stringKeys is the codec of string keys.
var stringKeys = keyCodec[string]{
	read: func(t *wire.Tensor, s *keyScratch) (int, error) {
		var err error
		if s.strs, err = t.Strings(s.strs[:0]); err != nil {
			return 0, status.Errorf(wire.InvalidArgument, "keys: %v", err)
		}
		return len(s.strs), nil
	},
	// A view of the tensor's bytes: maps look it up without copying, and
	// own copies it before a table keeps it.
	at: func(s *keyScratch, i int) string {
		b := s.strs[i]
		return unsafe.String(unsafe.SliceData(b), len(b))
	},
	index: newMapIndex[string],
	// TensorFlow's hash, mixed, so that its high bits spread too.
	spread: func(k string) uint64 {
		return tfHash64(unsafe.Slice(unsafe.StringData(k), len(k))) * 0x9e3779b97f4a7c15
	},
	own:  strings.Clone,
	hash: func(k string) uint64 { return tfHash64(unsafe.Slice(unsafe.StringData(k), len(k))) },
	encode: func(keys []string, shape []int64) (wire.Tensor, error) {
		elems := make([][]byte, len(keys))
		for i, k := range keys {
			elems[i] = unsafe.Slice(unsafe.StringData(k), len(k))
		}
		return encodeStringTensor(shape, elems)
	},
}
