package ops

import (
	"slices"
	"sync"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// A denseTable is TensorFlow's MutableDenseHashTable: open addressing
// over a power-of-two number of buckets, two arrays holding every
// bucket's key (the empty key where there is none, the deleted key where
// one was removed) and value. Its checkpoint is those arrays, so this
// table places keys where TensorFlow's does: a key's first bucket is
// TensorFlow's hash of it (tfhash.go) masked by the bucket count, the
// next ones follow by quadratic probing, and the table doubles its
// buckets before an insert that would fill more than max_load_factor of
// them, reinserting in bucket order. One lock guards it, as in
// TensorFlow: growth moves every bucket.
//
// One difference: TensorFlow stores a key in the first empty or deleted
// bucket of its probe sequence without looking further, so a key
// inserted again after an earlier key of its sequence was removed is
// stored twice, counted twice, and comes back after one remove. This
// table updates the key where it is; its buckets differ from
// TensorFlow's only after that sequence, and either one finds the
// other's keys.
type denseTable[K tableKey] struct {
	tableMeta
	keys      keyCodec[K]
	ks        int // elements of a key
	vb        int // bytes of a value
	load      float32
	empty     []K // the empty and deleted keys, ks elements each
	deleted   []K
	emptyHash uint64
	delHash   uint64
	bufs      sync.Pool // of *[]K, for the keys of a call

	mu      sync.RWMutex
	buckets int64
	entries int64
	kbuf    []K    // bucket b's key is kbuf[b*ks:][:ks]
	vbuf    []byte // bucket b's value is vbuf[b*vb:][:vb]
}

// checkBuckets checks a bucket count as TensorFlow does.
func checkBuckets(n int64) error {
	if !validBuckets(n) {
		return status.Errorf(wire.InvalidArgument, "number of buckets must be at least 4 and a power of 2, got: %d", n)
	}
	return nil
}

func validBuckets(n int64) bool { return n >= 4 && n&(n-1) == 0 }

// newDenseTable makes an empty table of buckets buckets whose empty and
// deleted keys are the tensors empty and deleted.
func newDenseTable(m tableMeta, empty, deleted *wire.Tensor, buckets int64, load float32) (lookupTable, error) {
	if len(empty.Shape) > 1 {
		return nil, status.Errorf(wire.InvalidArgument, "empty key must be a scalar or a vector, got shape %v", tfShape(empty.Shape))
	}
	if !sameShape(empty.Shape, deleted.Shape) {
		return nil, status.Errorf(wire.InvalidArgument, "empty and deleted keys must have same shape, got shapes: %v and %v", tfShape(empty.Shape), tfShape(deleted.Shape))
	}
	m.keyShape = slices.Clone(empty.Shape)
	if m.keyType == wire.DTString {
		return newDenseTableOf(m, stringKeys, empty, deleted, buckets, load)
	}
	return newDenseTableOf(m, intKeys(m.keyType), empty, deleted, buckets, load)
}

func newDenseTableOf[K tableKey](m tableMeta, keys keyCodec[K], empty, deleted *wire.Tensor, buckets int64, load float32) (*denseTable[K], error) {
	ks, _ := tensor.NumElements(m.keyShape)
	vs, _ := tensor.NumElements(m.valueShape)
	t := &denseTable[K]{tableMeta: m, keys: keys, ks: int(ks), vb: int(vs) * m.valueType.Size(), load: load}
	var err error
	if t.empty, err = t.ownKeys(empty); err != nil {
		return nil, err
	}
	if t.deleted, err = t.ownKeys(deleted); err != nil {
		return nil, err
	}
	t.emptyHash, t.delHash = t.hashOf(t.empty), t.hashOf(t.deleted)
	if slices.Equal(t.empty, t.deleted) {
		return nil, status.Errorf(wire.InvalidArgument, "table %s: empty and deleted keys cannot be equal", m.name)
	}
	t.allocate(buckets)
	return t, nil
}

// ownKeys returns copies of t's keys.
func (t *denseTable[K]) ownKeys(k *wire.Tensor) ([]K, error) {
	s := getKeyScratch()
	defer s.put()
	n, err := t.keys.read(k, s)
	if err != nil {
		return nil, err
	}
	out := make([]K, n)
	for i := range out {
		out[i] = t.keys.own(t.keys.at(s, i))
	}
	return out, nil
}

// allocate replaces the buckets with n empty ones.
func (t *denseTable[K]) allocate(n int64) {
	t.buckets, t.entries = n, 0
	t.kbuf = make([]K, int(n)*t.ks)
	for b := range int(n) {
		copy(t.kbuf[b*t.ks:], t.empty)
	}
	t.vbuf = make([]byte, int(n)*t.vb)
}

// hashOf is TensorFlow's hash of a key: its element's hash, or the
// combined hashes of its elements.
func (t *denseTable[K]) hashOf(key []K) uint64 {
	if len(key) == 1 {
		return t.keys.hash(key[0])
	}
	var h uint64
	for _, e := range key {
		h = tfHashCombine(h, t.keys.hash(e))
	}
	return h
}

// A denseKeys is one call's keys, each t.ks elements of all.
type denseKeys[K tableKey] struct {
	all []K
	n   int
	buf *[]K // all's memory, from and back to the table's pool
}

// readKeys reads keys, which must be n keys of the table's key shape,
// into a buffer of the table's pool; release it with done. String keys
// are views into the tensor.
func (t *denseTable[K]) readKeys(keys *wire.Tensor) (denseKeys[K], error) {
	n := int64(1)
	if len(keys.Shape) > 0 {
		n = keys.Shape[0]
	}
	if e, _ := keys.NumElements(); e != n*int64(t.ks) {
		return denseKeys[K]{}, status.Errorf(wire.InvalidArgument, "table %s: expected key shape %v got %v", t.name, tfShape(append([]int64{n}, t.keyShape...)), tfShape(keys.Shape))
	}
	s := getKeyScratch()
	defer s.put()
	m, err := t.keys.read(keys, s)
	if err != nil {
		return denseKeys[K]{}, err
	}
	p, _ := t.bufs.Get().(*[]K)
	if p == nil {
		p = new([]K)
	}
	all := (*p)[:0]
	for i := range m {
		all = append(all, t.keys.at(s, i))
	}
	*p = all
	return denseKeys[K]{all: all, n: int(n), buf: p}, nil
}

// done returns d's buffer to the pool, without its views.
func (t *denseTable[K]) done(d denseKeys[K]) {
	clear(*d.buf)
	t.bufs.Put(d.buf)
}

// key returns key i of d and its hash, refusing the empty and deleted
// keys.
func (t *denseTable[K]) key(d *denseKeys[K], i int) ([]K, uint64, error) {
	key := d.all[i*t.ks : (i+1)*t.ks]
	h := t.hashOf(key)
	if h == t.emptyHash && slices.Equal(key, t.empty) {
		return nil, 0, status.Errorf(wire.InvalidArgument, "table %s: using the empty_key as a table key is not allowed", t.name)
	}
	if h == t.delHash && slices.Equal(key, t.deleted) {
		return nil, 0, status.Errorf(wire.InvalidArgument, "table %s: using the deleted_key as a table key is not allowed", t.name)
	}
	return key, h, nil
}

// bucketKey returns bucket b's key.
func (t *denseTable[K]) bucketKey(b int64) []K { return t.kbuf[int(b)*t.ks:][:t.ks] }

// probe returns the bucket holding key, or else the empty bucket ending
// its probe sequence and false; the caller holds the lock.
func (t *denseTable[K]) probe(key []K, h uint64) (int64, bool, error) {
	mask := t.buckets - 1
	b := int64(h) & mask
	for probes := int64(1); ; probes++ {
		bk := t.bucketKey(b)
		if slices.Equal(bk, key) {
			return b, true, nil
		}
		if slices.Equal(bk, t.empty) {
			return b, false, nil
		}
		if probes >= t.buckets {
			return 0, false, status.Errorf(wire.Internal, "table %s: no empty bucket among %d", t.name, t.buckets)
		}
		b = (b + probes) & mask
	}
}

// find returns each key's value, or the default's first value: a dense
// table takes one default for all keys, as TensorFlow's does, even where
// the default has a value per key.
func (t *denseTable[K]) find(keys, defaults *wire.Tensor, outShape []int64) (wire.Tensor, error) {
	d, err := t.readKeys(keys)
	if err != nil {
		return wire.Tensor{}, err
	}
	defer t.done(d)
	out, err := tensor.New(t.valueType, outShape)
	if err != nil {
		return out, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	for i := range d.n {
		key, h, err := t.key(&d, i)
		if err == nil {
			var b int64
			var ok bool
			if b, ok, err = t.probe(key, h); err == nil {
				src := defaults.Data
				if ok {
					src = t.vbuf[int(b)*t.vb:]
				}
				copy(out.Data[i*t.vb:(i+1)*t.vb], src)
			}
		}
		if err != nil {
			out.Buf.Release()
			return wire.Tensor{}, err
		}
	}
	return out, nil
}

// insert sets each key's value, growing the table first if the keys
// would fill it past its load factor. As in TensorFlow, a refused key
// (the empty or deleted key) fails the call after the keys before it
// were stored.
func (t *denseTable[K]) insert(keys, values *wire.Tensor) error {
	d, err := t.readKeys(keys)
	if err != nil {
		return err
	}
	defer t.done(d)
	t.mu.Lock()
	defer t.mu.Unlock()
	pending := t.entries + int64(d.n)
	if float32(pending) > float32(t.buckets)*t.load {
		n := t.buckets
		for float32(pending) > float32(n)*t.load {
			n <<= 1
		}
		t.rebucket(n)
	}
	for i := range d.n {
		key, h, err := t.key(&d, i)
		if err != nil {
			return err
		}
		if err := t.put(key, h, values.Data[i*t.vb:(i+1)*t.vb]); err != nil {
			return err
		}
	}
	return nil
}

// put stores key's value: where the key is, or in the first deleted or
// empty bucket of its probe sequence. The caller holds the lock for
// writing.
func (t *denseTable[K]) put(key []K, h uint64, value []byte) error {
	mask := t.buckets - 1
	b := int64(h) & mask
	free := int64(-1) // the first deleted bucket seen
	for probes := int64(1); ; probes++ {
		bk := t.bucketKey(b)
		if slices.Equal(bk, key) {
			copy(t.vbuf[int(b)*t.vb:], value)
			return nil
		}
		if slices.Equal(bk, t.empty) {
			if free < 0 {
				free = b
			}
			break
		}
		if free < 0 && slices.Equal(bk, t.deleted) {
			free = b
		}
		if probes >= t.buckets {
			if free < 0 {
				return status.Errorf(wire.Internal, "table %s: no free bucket among %d", t.name, t.buckets)
			}
			break
		}
		b = (b + probes) & mask
	}
	for j, e := range key {
		t.kbuf[int(free)*t.ks+j] = t.keys.own(e)
	}
	copy(t.vbuf[int(free)*t.vb:], value)
	t.entries++
	return nil
}

// rebucket moves every key into n new buckets, in bucket order.
func (t *denseTable[K]) rebucket(n int64) {
	oldKeys, oldVals, oldN := t.kbuf, t.vbuf, t.buckets
	t.allocate(n)
	for b := range int(oldN) {
		key := oldKeys[b*t.ks:][:t.ks]
		if slices.Equal(key, t.empty) || slices.Equal(key, t.deleted) {
			continue
		}
		// The table has room: n buckets hold more than the old ones did.
		_ = t.put(key, t.hashOf(key), oldVals[b*t.vb:][:t.vb])
	}
}

func (t *denseTable[K]) remove(keys *wire.Tensor) error {
	d, err := t.readKeys(keys)
	if err != nil {
		return err
	}
	defer t.done(d)
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range d.n {
		key, h, err := t.key(&d, i)
		if err != nil {
			return err
		}
		b, ok, err := t.probe(key, h)
		if err != nil {
			return err
		}
		if ok {
			copy(t.bucketKey(b), t.deleted)
			t.entries--
		}
	}
	return nil
}

func (t *denseTable[K]) size() int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.entries
}

// vectorized is shape, a vector of one element if shape is a scalar: how
// the buckets hold scalar keys and values.
func vectorized(shape []int64) []int64 {
	if len(shape) == 0 {
		return []int64{1}
	}
	return shape
}

// export returns the buckets: keys [buckets, key elements] and values
// [buckets, value elements], empty and deleted buckets among them.
func (t *denseTable[K]) export() (keys, values wire.Tensor, err error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if keys, err = t.keys.encode(t.kbuf, []int64{t.buckets, int64(t.ks)}); err != nil {
		return keys, values, err
	}
	vs := vectorized(t.valueShape)
	if values, err = tensor.New(t.valueType, []int64{t.buckets, vs[0]}); err != nil {
		keys.Buf.Release()
		return keys, values, err
	}
	copy(values.Data, t.vbuf)
	return keys, values, nil
}

// checkImport checks buckets as export writes them: keys [n, key
// elements], values [n, value elements], n a bucket count.
func (t *denseTable[K]) checkImport(keys, values *wire.Tensor) error {
	if err := checkKeyTypes(&t.tableMeta, keys, values); err != nil {
		return err
	}
	if len(keys.Shape) != 2 || keys.Shape[1] != int64(t.ks) {
		return status.Errorf(wire.InvalidArgument, "table %s: expected buckets of shape [n,%d] for keys, got %v", t.name, t.ks, tfShape(keys.Shape))
	}
	want := append([]int64{keys.Shape[0]}, vectorized(t.valueShape)...)
	if !sameShape(values.Shape, want) {
		return status.Errorf(wire.InvalidArgument, "table %s: expected shape %v for value, got %v", t.name, tfShape(want), tfShape(values.Shape))
	}
	if n := keys.Shape[0]; !validBuckets(n) {
		return status.Errorf(wire.InvalidArgument, "table %s: import: number of buckets must be at least 4 and a power of 2, got: %d", t.name, n)
	}
	return nil
}

// importValues makes the buckets given the table's own.
func (t *denseTable[K]) importValues(keys, values *wire.Tensor) error {
	s := getKeyScratch()
	defer s.put()
	n, err := t.keys.read(keys, s)
	if err != nil {
		return err
	}
	kbuf := make([]K, n)
	for i := range kbuf {
		kbuf[i] = t.keys.own(t.keys.at(s, i))
	}
	vbuf := slices.Clone(values.Data)
	buckets := keys.Shape[0]
	entries := int64(0)
	for b := range int(buckets) {
		key := kbuf[b*t.ks:][:t.ks]
		if !slices.Equal(key, t.empty) && !slices.Equal(key, t.deleted) {
			entries++
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buckets, t.entries, t.kbuf, t.vbuf = buckets, entries, kbuf, vbuf
	return nil
}
