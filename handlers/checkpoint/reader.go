package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/bits"
	"os"
	"sort"
	"sync"

	"github.com/starwire/starwire/handlers/checkpoint/table"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
	"google.golang.org/protobuf/proto"
)

// Entry describes one saved tensor.
type Entry struct {
	Name   string
	DType  wire.DataType
	Shape  []int64
	Slices []Slice // the saved slices of a partitioned tensor; nil when saved whole
}

// A Reader reads a checkpoint. Its index is read and checked by Open; data
// files are opened on first use. Safe for concurrent use.
type Reader struct {
	prefix    string
	indexPath string
	numShards int
	tab       *table.Table
	entries   []Entry // sorted by name; header and slice keys left out
	mu        sync.Mutex
	shards    map[int32]*shardFile
}

type shardFile struct {
	f    io.ReaderAt
	c    io.Closer
	size int64
}

// Open reads the index of the checkpoint under prefix. A missing index is
// ErrNotFound; an unreadable one ErrCorrupt.
func Open(prefix string) (*Reader, error) {
	path := IndexFile(prefix)
	data, err := os.ReadFile(path)
	if err != nil {
		// err names the index file; the message names the prefix once.
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("checkpoint %s: %w: %w", prefix, err, ErrNotFound)
		}
		return nil, fmt.Errorf("checkpoint %s: %w", prefix, err)
	}
	return parseIndex(prefix, path, data)
}

func parseIndex(prefix, path string, data []byte) (*Reader, error) {
	tab, err := table.Parse(path, data)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w: %w", prefix, err, ErrCorrupt)
	}
	r := &Reader{prefix: prefix, indexPath: path, tab: tab, shards: make(map[int32]*shardFile)}
	if tab.Len() == 0 {
		return nil, fmt.Errorf("checkpoint %s: no header: %w", path, ErrCorrupt)
	}
	k, v := tab.At(0)
	var h tfpb.BundleHeaderProto
	if len(k) != 0 || proto.Unmarshal(v, &h) != nil {
		return nil, fmt.Errorf("checkpoint %s: first entry %q is not a header: %w", path, k, ErrCorrupt)
	}
	if h.Endianness != tfpb.BundleHeaderProto_LITTLE {
		return nil, fmt.Errorf("checkpoint %s: big-endian data: %w", path, ErrMismatch)
	}
	// TensorFlow's CheckVersions: this reader is version 1 and reads
	// producers from 0 on, unless the producer rules it out.
	if v := h.GetVersion(); v.GetProducer() < 0 || v.GetMinConsumer() > 1 || containsInt32(v.GetBadConsumers(), 1) {
		return nil, fmt.Errorf("checkpoint %s: version %v not readable: %w", path, v, ErrMismatch)
	}
	if h.NumShards < 1 || h.NumShards > 99999 {
		return nil, fmt.Errorf("checkpoint %s: %d shards: %w", path, h.NumShards, ErrCorrupt)
	}
	r.numShards = int(h.NumShards)
	for i := 1; i < tab.Len(); i++ {
		k, v := tab.At(i)
		if k[0] == 0 { // a slice key (ordered code starts with 0)
			continue
		}
		e, err := r.parseEntry(string(k), v)
		if err != nil {
			return nil, err
		}
		r.entries = append(r.entries, Entry{
			Name: string(k), DType: wire.DataType(e.Dtype), Shape: shapeOf(e.Shape), Slices: slicesOf(e),
		})
	}
	return r, nil
}

func containsInt32(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func slicesOf(e *tfpb.BundleEntryProto) []Slice {
	if len(e.Slices) == 0 {
		return nil
	}
	s := make([]Slice, len(e.Slices))
	for i, p := range e.Slices {
		s[i] = sliceFromProto(p)
	}
	return s
}

// parseEntry decodes and checks an entry's metadata; the data's bounds
// are checked against the shard's size when it is read.
func (r *Reader) parseEntry(key string, v []byte) (*tfpb.BundleEntryProto, error) {
	var e tfpb.BundleEntryProto
	if err := proto.Unmarshal(v, &e); err != nil {
		return nil, fmt.Errorf("checkpoint %s: entry %q: %v: %w", r.indexPath, key, err, ErrCorrupt)
	}
	dt := wire.DataType(e.Dtype)
	if dt != wire.DTString && dt.Size() == 0 {
		return nil, fmt.Errorf("checkpoint %s: entry %q: dtype %v: %w", r.indexPath, key, dt, ErrCorrupt)
	}
	shape := shapeOf(e.Shape)
	if len(shape) > wire.MaxRank {
		return nil, fmt.Errorf("checkpoint %s: entry %q: rank %d: %w", r.indexPath, key, len(shape), ErrCorrupt)
	}
	if _, ok := numElements(shape); !ok {
		return nil, fmt.Errorf("checkpoint %s: entry %q: shape %v: %w", r.indexPath, key, shape, ErrCorrupt)
	}
	if e.ShardId < 0 || int(e.ShardId) >= r.numShards || e.Offset < 0 || e.Size < 0 {
		return nil, fmt.Errorf("checkpoint %s: entry %q: shard %d of %d, offset %d, size %d: %w",
			r.indexPath, key, e.ShardId, r.numShards, e.Offset, e.Size, ErrCorrupt)
	}
	for _, s := range e.Slices {
		if _, err := sliceFromProto(s).bounds(shape); err != nil {
			return nil, fmt.Errorf("checkpoint %s: entry %q: %w: %w", r.indexPath, key, err, ErrCorrupt)
		}
	}
	return &e, nil
}

func numElements(shape []int64) (int64, bool) {
	t := wire.Tensor{Shape: shape}
	return t.NumElements()
}

// Close closes the data files.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	for id, s := range r.shards {
		if cerr := s.c.Close(); err == nil {
			err = cerr
		}
		delete(r.shards, id)
	}
	return err
}

// Entries returns the saved tensors, sorted by name. The slice is shared:
// do not modify it.
func (r *Reader) Entries() []Entry { return r.entries }

// Entry returns the entry of the tensor name.
func (r *Reader) Entry(name string) (Entry, bool) {
	i := sort.Search(len(r.entries), func(i int) bool { return r.entries[i].Name >= name })
	if i < len(r.entries) && r.entries[i].Name == name {
		return r.entries[i], true
	}
	return Entry{}, false
}

// Read returns the tensor name whole, assembled from its slices when it
// was saved in slices. Data is a fresh buffer the caller owns (Buf is nil).
func (r *Reader) Read(name string) (wire.Tensor, error) {
	return r.ReadSlice(name, Slice{})
}

// ReadSlice returns slice s of the tensor name, whichever slices it was
// saved in (the saved slices must cover s). Data is a fresh buffer the
// caller owns.
func (r *Reader) ReadSlice(name string, s Slice) (wire.Tensor, error) {
	e, err := r.lookup(name)
	if err != nil {
		return wire.Tensor{}, err
	}
	full := shapeOf(e.Shape)
	want, err := s.bounds(full)
	if err != nil {
		return wire.Tensor{}, fmt.Errorf("checkpoint %s: tensor %q: %w", r.prefix, name, err)
	}
	if len(e.Slices) == 0 {
		t, err := r.readData(name, e)
		if err != nil || want.isFull(full) {
			return t, err
		}
		return extract(t, box{start: make([]int64, len(full)), length: full}, want)
	}
	return r.assemble(name, e, full, want)
}

func (r *Reader) lookup(name string) (*tfpb.BundleEntryProto, error) {
	v, ok := r.tab.Get([]byte(name))
	if !ok || name == "" {
		return nil, fmt.Errorf("checkpoint %s: tensor %q: %w", r.prefix, name, ErrNotFound)
	}
	return r.parseEntry(name, v)
}

// assemble reads the saved slices of name that meet want and copies their
// common parts into a tensor of want's shape.
func (r *Reader) assemble(name string, e *tfpb.BundleEntryProto, full []int64, want box) (wire.Tensor, error) {
	dt := wire.DataType(e.Dtype)
	stored := make([]box, len(e.Slices))
	specs := make([]Slice, len(e.Slices))
	for i, p := range e.Slices {
		specs[i] = sliceFromProto(p).canonical(full)
		stored[i], _ = specs[i].bounds(full) // checked by parseEntry
		for j := range i {
			if _, overlap := intersect(stored[i], stored[j]); overlap {
				return wire.Tensor{}, fmt.Errorf("checkpoint %s: tensor %q: saved slices %s and %s overlap: %w",
					r.prefix, name, specs[j], specs[i], ErrCorrupt)
			}
		}
	}
	// The parts are read before the result is allocated: its size then
	// comes from data that exists, not from a shape an index could inflate.
	type piece struct {
		t      wire.Tensor
		region box
		src    box
	}
	var pieces []piece
	covered := int64(0)
	for i, sb := range stored {
		region, ok := intersect(sb, want)
		if !ok {
			continue
		}
		key := sliceKey(name, specs[i])
		se, err := r.lookup(key)
		if err != nil {
			return wire.Tensor{}, fmt.Errorf("checkpoint %s: tensor %q: slice %s: %w", r.prefix, name, specs[i], ErrCorrupt)
		}
		if wire.DataType(se.Dtype) != dt || !equalShape(shapeOf(se.Shape), sb.length) || len(se.Slices) != 0 {
			return wire.Tensor{}, fmt.Errorf("checkpoint %s: tensor %q: slice %s saved as %v%v: %w",
				r.prefix, name, specs[i], wire.DataType(se.Dtype), shapeOf(se.Shape), ErrCorrupt)
		}
		part, err := r.readData(name+" slice "+specs[i].String(), se)
		if err != nil {
			return wire.Tensor{}, err
		}
		pieces = append(pieces, piece{part, region, sb})
		covered += region.volume()
	}
	if covered != want.volume() {
		return wire.Tensor{}, fmt.Errorf("checkpoint %s: tensor %q: saved slices cover %d of the %d elements asked for: %w",
			r.prefix, name, covered, want.volume(), ErrMismatch)
	}
	out := newAssembly(dt, want)
	for _, p := range pieces {
		if err := out.copyFrom(p.t, p.region, p.src); err != nil {
			return wire.Tensor{}, fmt.Errorf("checkpoint %s: tensor %q: %w", r.prefix, name, err)
		}
	}
	return out.tensor(), nil
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// shard returns the open data file of shard id.
func (r *Reader) shard(id int32) (*shardFile, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.shards[id]; ok {
		return s, nil
	}
	path := DataFile(r.prefix, int(id), r.numShards)
	f, err := os.Open(path)
	if err != nil {
		// err names the data file.
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("checkpoint %s: %w: %w", r.prefix, err, ErrCorrupt)
		}
		return nil, fmt.Errorf("checkpoint %s: %w", r.prefix, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("checkpoint %s: %w", r.prefix, err)
	}
	s := &shardFile{f: f, c: f, size: st.Size()}
	r.shards[id] = s
	return s, nil
}

// readData reads the bytes of a whole (unsliced) entry, checks them and
// returns them as a tensor; what names the tensor in errors.
func (r *Reader) readData(what string, e *tfpb.BundleEntryProto) (wire.Tensor, error) {
	dt, shape := wire.DataType(e.Dtype), shapeOf(e.Shape)
	n, _ := numElements(shape) // checked by parseEntry
	path := DataFile(r.prefix, int(e.ShardId), r.numShards)
	fail := func(format string, args ...any) (wire.Tensor, error) {
		return wire.Tensor{}, fmt.Errorf("checkpoint %s: tensor %q: %s: %w", path, what, fmt.Sprintf(format, args...), ErrCorrupt)
	}
	if dt != wire.DTString {
		hi, lo := bits.Mul64(uint64(n), uint64(dt.Size()))
		if hi != 0 || lo != uint64(e.Size) {
			return fail("%d bytes stored for %v%v", e.Size, dt, shape)
		}
	} else if uint64(e.Size) < uint64(n)+4 {
		return fail("%d bytes stored for %d strings", e.Size, n)
	}
	sf, err := r.shard(e.ShardId)
	if err != nil {
		return wire.Tensor{}, fmt.Errorf("tensor %q: %w", what, err)
	}
	if e.Offset > sf.size || e.Size > sf.size-e.Offset {
		return fail("bytes [%d, +%d) beyond the file's %d", e.Offset, e.Size, sf.size)
	}
	if e.Size > math.MaxInt {
		return fail("%d bytes", e.Size)
	}
	buf := make([]byte, e.Size)
	if _, err := sf.f.ReadAt(buf, e.Offset); err != nil {
		if errors.Is(err, io.EOF) {
			return fail("file shrank under the reader")
		}
		return wire.Tensor{}, fmt.Errorf("checkpoint %s: tensor %q: %w", path, what, err)
	}
	want := table.UnmaskCRC(e.Crc32C)
	if dt != wire.DTString {
		if got := table.CRC32C(buf); got != want {
			return fail("crc32c %#08x, index says %#08x", got, want)
		}
		return wire.Tensor{DType: dt, Shape: shape, Data: buf}, nil
	}
	data, err := decodeStrings(buf, n, want)
	if err != nil {
		return fail("%v", err)
	}
	return wire.Tensor{DType: dt, Shape: shape, Data: data}, nil
}

// decodeStrings turns TensorFlow's string layout (n varint64 lengths,
// their masked crc32c, the bytes) into wire's (each element's uvarint
// length then its bytes), checking both checksums; want is the entry's
// unmasked crc32c.
func decodeStrings(b []byte, n int64, want uint32) ([]byte, error) {
	// Two passes over the lengths (check, then copy) rather than a slice
	// of n lengths: the result is then the only allocation.
	p := 0
	var crc uint32
	var fixed [8]byte
	var total uint64
	for i := range n {
		l, k := binary.Uvarint(b[p:])
		if k <= 0 {
			return nil, fmt.Errorf("string %d of %d: bad length", i, n)
		}
		p += k
		total += l
		if total < l || total > uint64(len(b)) {
			return nil, fmt.Errorf("string lengths exceed the %d bytes stored", len(b))
		}
		crc = extendLength(crc, l, fixed[:])
	}
	if len(b)-p < 4 {
		return nil, fmt.Errorf("no length checksum after %d lengths", n)
	}
	if got := table.UnmaskCRC(binary.LittleEndian.Uint32(b[p:])); got != crc {
		return nil, fmt.Errorf("length crc32c %#08x, stored %#08x", crc, got)
	}
	crc = table.ExtendCRC32C(crc, b[p:p+4])
	data := p + 4
	if uint64(len(b)-data) != total {
		return nil, fmt.Errorf("%d bytes of string data, lengths say %d", len(b)-data, total)
	}
	if got := table.ExtendCRC32C(crc, b[data:]); got != want {
		return nil, fmt.Errorf("crc32c %#08x, index says %#08x", got, want)
	}
	out := make([]byte, 0, len(b)-4)
	for q := 0; q < p; {
		l, k := binary.Uvarint(b[q:])
		q += k
		out = binary.AppendUvarint(out, l)
		out = append(out, b[data:data+int(l)]...)
		data += int(l)
	}
	return out, nil
}
