package checkpoint

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/starwire/starwire/handlers/checkpoint/table"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
	"google.golang.org/protobuf/proto"
)

// A Writer saves tensors as one shard of a checkpoint. Tensors go to a
// temporary data file as they are added; Finish writes the index and
// renames both into place. Not safe for concurrent use.
type Writer struct {
	prefix    string
	shard     int
	numShards int
	dataPath  string // final names
	indexPath string
	tmpData   string
	tmpIndex  string
	f         *os.File
	bw        *bufio.Writer
	size      int64
	entries   map[string]*tfpb.BundleEntryProto
	scratch   []byte
	err       error
}

var errFinished = errors.New("checkpoint: writer finished")

// NewWriter starts shard (of numShards) of the checkpoint under prefix: it
// will write prefix.data-SSSSS-of-NNNNN and prefix.index. Use
// NewWriter(p, 0, 1) for a checkpoint in one file; a sharded save writes
// each shard under its own prefix and joins them with Merge, as
// TensorFlow's SaveV2 and MergeV2Checkpoints do.
func NewWriter(prefix string, shard, numShards int) (*Writer, error) {
	if numShards < 1 || shard < 0 || shard >= numShards || numShards > 99999 {
		return nil, fmt.Errorf("checkpoint %s: shard %d of %d: %w", prefix, shard, numShards, ErrMismatch)
	}
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", prefix, err)
	}
	w := &Writer{
		prefix: prefix, shard: shard, numShards: numShards,
		dataPath:  DataFile(prefix, shard, numShards),
		indexPath: IndexFile(prefix),
		entries:   make(map[string]*tfpb.BundleEntryProto),
	}
	suffix := fmt.Sprintf(".tempstate%d", rand.Uint64())
	w.tmpData, w.tmpIndex = w.dataPath+suffix, w.indexPath+suffix
	f, err := os.OpenFile(w.tmpData, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", prefix, err)
	}
	w.f, w.bw = f, bufio.NewWriterSize(f, 1<<20)
	return w, nil
}

// Add saves t under name. t.Data is only read during the call.
func (w *Writer) Add(name string, t *wire.Tensor) error {
	if w.err != nil {
		return w.err
	}
	if err := w.add(name, t); err != nil {
		w.fail(err)
		return err
	}
	return nil
}

func (w *Writer) add(name string, t *wire.Tensor) error {
	if name == "" {
		return fmt.Errorf("checkpoint %s: empty tensor name (the header's key): %w", w.prefix, ErrMismatch)
	}
	if _, dup := w.entries[name]; dup {
		return fmt.Errorf("checkpoint %s: tensor %q added twice: %w", w.prefix, name, ErrMismatch)
	}
	if err := t.Check(); err != nil {
		return fmt.Errorf("checkpoint %s: tensor %q: %w: %w", w.prefix, name, err, ErrMismatch)
	}
	e := &tfpb.BundleEntryProto{
		Dtype:   tfpb.DataType(t.DType),
		Shape:   shapeProto(t.Shape),
		ShardId: int32(w.shard),
		Offset:  w.size,
	}
	var n int64
	var crc uint32
	var err error
	if t.DType == wire.DTString {
		n, crc, err = w.writeStrings(name, t)
	} else {
		n, crc, err = int64(len(t.Data)), table.CRC32C(t.Data), w.write(t.Data)
	}
	if err != nil {
		return err
	}
	e.Size, e.Crc32C = n, table.MaskCRC(crc)
	w.size += n
	w.entries[name] = e
	return nil
}

// writeStrings writes a string tensor as TensorFlow does: the varint64
// lengths, the masked crc32c of the lengths, then the bytes. The checksum
// covers each length as a little-endian uint32 (uint64 past 4 GiB), not as
// its varint, then the stored length checksum, then the bytes.
func (w *Writer) writeStrings(name string, t *wire.Tensor) (int64, uint32, error) {
	elems, err := t.Strings(nil)
	if err != nil {
		return 0, 0, fmt.Errorf("checkpoint %s: tensor %q: %w: %w", w.prefix, name, err, ErrMismatch)
	}
	lens := w.scratch[:0]
	var crc uint32
	var fixed [8]byte
	for _, e := range elems {
		lens = binary.AppendUvarint(lens, uint64(len(e)))
		crc = extendLength(crc, uint64(len(e)), fixed[:])
	}
	binary.LittleEndian.PutUint32(fixed[:4], table.MaskCRC(crc))
	crc = table.ExtendCRC32C(crc, fixed[:4])
	lens = append(lens, fixed[:4]...)
	w.scratch = lens
	n := int64(len(lens))
	if err := w.write(lens); err != nil {
		return 0, 0, err
	}
	for _, e := range elems {
		crc = table.ExtendCRC32C(crc, e)
		n += int64(len(e))
		if err := w.write(e); err != nil {
			return 0, 0, err
		}
	}
	return n, crc, nil
}

func extendLength(crc uint32, l uint64, buf []byte) uint32 {
	if l <= 1<<32-1 {
		binary.LittleEndian.PutUint32(buf, uint32(l))
		return table.ExtendCRC32C(crc, buf[:4])
	}
	binary.LittleEndian.PutUint64(buf, l)
	return table.ExtendCRC32C(crc, buf[:8])
}

func (w *Writer) write(p []byte) error {
	if _, err := w.bw.Write(p); err != nil {
		return fmt.Errorf("checkpoint %s: write %s: %w", w.prefix, w.tmpData, err)
	}
	return nil
}

// AddSlice saves t as slice s of the tensor name of shape full, as
// TensorFlow saves a partitioned variable's part: the entry under name
// (created by the first part) gains s in its slice list, and t is saved
// under the slice's key. A slice that is the whole tensor is saved as a
// plain tensor.
func (w *Writer) AddSlice(name string, full []int64, s Slice, t *wire.Tensor) error {
	if w.err != nil {
		return w.err
	}
	if err := w.addSlice(name, full, s, t); err != nil {
		w.fail(err)
		return err
	}
	return nil
}

func (w *Writer) addSlice(name string, full []int64, s Slice, t *wire.Tensor) error {
	b, err := s.bounds(full)
	if err != nil {
		return fmt.Errorf("checkpoint %s: tensor %q: %w", w.prefix, name, err)
	}
	if !slices.Equal(b.length, t.Shape) {
		return fmt.Errorf("checkpoint %s: tensor %q: slice %s of %v is %v, tensor is %v: %w",
			w.prefix, name, s, full, b.length, t.Shape, ErrMismatch)
	}
	if b.isFull(full) {
		return w.add(name, t)
	}
	c := s.canonical(full)
	e, ok := w.entries[name]
	switch {
	case !ok:
		// TensorFlow leaves shard_id and offset out (its shard is always 0);
		// the shard is set so that Merge finds this shard's data file.
		e = &tfpb.BundleEntryProto{Dtype: tfpb.DataType(t.DType), Shape: shapeProto(full), ShardId: int32(w.shard)}
	case len(e.Slices) == 0:
		return fmt.Errorf("checkpoint %s: tensor %q saved whole, then a slice: %w", w.prefix, name, ErrMismatch)
	case wire.DataType(e.Dtype) != t.DType || !slices.Equal(shapeOf(e.Shape), full):
		return fmt.Errorf("checkpoint %s: tensor %q: slice %s as %v%v, earlier slices as %v%v: %w",
			w.prefix, name, s, t.DType, full, wire.DataType(e.Dtype), shapeOf(e.Shape), ErrMismatch)
	}
	if err := w.add(sliceKey(name, c), t); err != nil {
		return err
	}
	e.Slices = append(e.Slices, c.toProto())
	w.entries[name] = e
	return nil
}

func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// Finish writes the index and moves the data file and the index into
// place: each is written under a temporary name, synced and renamed, the
// index last, then the directory is synced. A crash before the renames
// leaves an older checkpoint under the same prefix as it was; between
// them, the old index meets the new data and reads fail their checksums
// (ErrCorrupt), never return wrong values. After a failed Add, Finish
// returns that error and removes the temporary files.
func (w *Writer) Finish() error {
	if w.err != nil {
		w.Abort()
		return w.err
	}
	err := w.finish()
	if err != nil {
		w.Abort()
	}
	w.err = errFinished
	return err
}

func (w *Writer) finish() error {
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("checkpoint %s: write %s: %w", w.prefix, w.tmpData, err)
	}
	if err := syncClose(w.f); err != nil {
		return fmt.Errorf("checkpoint %s: %s: %w", w.prefix, w.tmpData, err)
	}
	w.f = nil
	header := &tfpb.BundleHeaderProto{
		NumShards:  int32(w.numShards),
		Endianness: tfpb.BundleHeaderProto_LITTLE,
		Version:    &tfpb.VersionDef{Producer: 1},
	}
	if err := writeIndex(w.tmpIndex, header, w.entries); err != nil {
		return fmt.Errorf("checkpoint %s: %w", w.prefix, err)
	}
	if err := os.Rename(w.tmpData, w.dataPath); err != nil {
		return fmt.Errorf("checkpoint %s: %w", w.prefix, err)
	}
	if err := os.Rename(w.tmpIndex, w.indexPath); err != nil {
		return fmt.Errorf("checkpoint %s: %w", w.prefix, err)
	}
	return syncDir(filepath.Dir(w.prefix))
}

// Abort discards what was written. Safe to call after Finish or twice.
func (w *Writer) Abort() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
	os.Remove(w.tmpData)
	os.Remove(w.tmpIndex)
	if w.err == nil {
		w.err = errFinished
	}
}

// writeIndex writes header and entries, sorted by key, as a table at path
// (synced), as TensorFlow's writer does: uncompressed.
func writeIndex(path string, header *tfpb.BundleHeaderProto, entries map[string]*tfpb.BundleEntryProto) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	t := table.NewWriter(bw, table.Options{})
	err = addProto(t, "", header)
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err == nil {
			err = addProto(t, k, entries[k])
		}
	}
	if err == nil {
		err = t.Finish()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = syncClose(f)
	} else {
		f.Close()
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func addProto(t *table.Writer, key string, m proto.Message) error {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return err
	}
	return t.Add([]byte(key), b)
}

func syncClose(f *os.File) error {
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("checkpoint: sync %s: %w", dir, err)
	}
	return nil
}

func shapeProto(shape []int64) *tfpb.TensorShapeProto {
	p := &tfpb.TensorShapeProto{}
	for _, d := range shape {
		p.Dim = append(p.Dim, &tfpb.TensorShapeProto_Dim{Size: d})
	}
	return p
}

func shapeOf(p *tfpb.TensorShapeProto) []int64 {
	s := make([]int64, len(p.GetDim()))
	for i, d := range p.GetDim() {
		s[i] = d.GetSize()
	}
	return s
}
