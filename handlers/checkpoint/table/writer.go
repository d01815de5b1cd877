package table

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/golang/snappy"
)

// Options configure a Writer; the zero value is TensorFlow's checkpoint
// index: 256 KiB blocks, a restart point every 16 keys, no compression.
type Options struct {
	BlockSize       int  // a block is cut once it reaches this many bytes
	RestartInterval int  // keys between restart points
	Snappy          bool // compress blocks that shrink by more than 12.5%
}

// A Writer writes a table to an io.Writer. Keys must be added in strictly
// increasing bytewise order. Not safe for concurrent use.
type Writer struct {
	w       io.Writer
	opts    Options
	offset  uint64
	data    blockBuilder
	index   blockBuilder
	lastKey []byte
	// pending is the handle of the last data block written, whose index
	// entry waits for the next key so its separator can be shortened.
	pending    handle
	hasPending bool
	nkeys      int
	scratch    []byte
	err        error
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer, opts Options) *Writer {
	if opts.BlockSize <= 0 {
		opts.BlockSize = defaultBlockSize
	}
	if opts.RestartInterval <= 0 {
		opts.RestartInterval = defaultRestarts
	}
	t := &Writer{w: w, opts: opts}
	t.data.interval = opts.RestartInterval
	t.index.interval = 1 // LevelDB restarts the index at every entry
	return t
}

// Add appends key/value; key must sort after the previous key.
func (t *Writer) Add(key, value []byte) error {
	if t.err != nil {
		return t.err
	}
	if t.nkeys > 0 && bytes.Compare(key, t.lastKey) <= 0 {
		return fmt.Errorf("table: key %q added after %q: keys must increase", key, t.lastKey)
	}
	if t.hasPending {
		t.addIndexEntry(shortestSeparator(t.lastKey, key))
	}
	t.data.add(key, value)
	t.lastKey = append(t.lastKey[:0], key...)
	t.nkeys++
	if t.data.estimate() >= t.opts.BlockSize {
		t.flush()
	}
	return t.err
}

func (t *Writer) addIndexEntry(sep []byte) {
	t.scratch = t.pending.append(t.scratch[:0])
	t.index.add(sep, t.scratch)
	t.hasPending = false
}

func (t *Writer) flush() {
	if t.data.empty() {
		return
	}
	t.pending = t.writeBlock(&t.data, t.opts.Snappy)
	t.hasPending = true
}

// writeBlock writes b's contents and trailer and resets b.
func (t *Writer) writeBlock(b *blockBuilder, compress bool) handle {
	raw := b.finish()
	contents, typ := raw, byte(noCompression)
	if compress {
		c := snappy.Encode(nil, raw)
		if len(c) < len(raw)-len(raw)/8 {
			contents, typ = c, snappyCompression
		}
	}
	h := handle{offset: t.offset, size: uint64(len(contents))}
	var trailer [trailerLen]byte
	trailer[0] = typ
	crc := ExtendCRC32C(CRC32C(contents), trailer[:1])
	binary.LittleEndian.PutUint32(trailer[1:], MaskCRC(crc))
	t.write(contents)
	t.write(trailer[:])
	b.reset()
	return h
}

func (t *Writer) write(p []byte) {
	if t.err != nil {
		return
	}
	n, err := t.w.Write(p)
	t.offset += uint64(n)
	if err != nil {
		t.err = fmt.Errorf("table: write: %w", err)
	}
}

// Finish writes the last data block, the metaindex and index blocks and
// the footer. The Writer is unusable afterwards.
func (t *Writer) Finish() error {
	t.flush()
	var meta blockBuilder
	meta.interval = t.opts.RestartInterval
	metaHandle := t.writeBlock(&meta, t.opts.Snappy)
	if t.hasPending {
		t.addIndexEntry(shortSuccessor(t.lastKey))
	}
	indexHandle := t.writeBlock(&t.index, t.opts.Snappy)
	footer := make([]byte, 0, FooterLen)
	footer = metaHandle.append(footer)
	footer = indexHandle.append(footer)
	footer = footer[:2*maxHandleLen]
	footer = binary.LittleEndian.AppendUint64(footer, Magic)
	t.write(footer)
	if t.err == nil {
		t.err = fmt.Errorf("table: writer finished")
		return nil
	}
	return t.err
}

// blockBuilder accumulates one block's entries: shared prefix length,
// unshared length and value length as uvarints, then the unshared key
// bytes and the value; the restart offsets and their count close it.
type blockBuilder struct {
	interval int
	buf      []byte
	restarts []uint32
	counter  int
	lastKey  []byte
}

func (b *blockBuilder) empty() bool { return len(b.buf) == 0 }

func (b *blockBuilder) estimate() int { return len(b.buf) + 4*len(b.restarts) + 4 }

func (b *blockBuilder) add(key, value []byte) {
	shared := 0
	if b.counter < b.interval && len(b.restarts) > 0 {
		n := min(len(key), len(b.lastKey))
		for shared < n && key[shared] == b.lastKey[shared] {
			shared++
		}
	} else {
		b.restarts = append(b.restarts, uint32(len(b.buf)))
		b.counter = 0
	}
	b.buf = binary.AppendUvarint(b.buf, uint64(shared))
	b.buf = binary.AppendUvarint(b.buf, uint64(len(key)-shared))
	b.buf = binary.AppendUvarint(b.buf, uint64(len(value)))
	b.buf = append(b.buf, key[shared:]...)
	b.buf = append(b.buf, value...)
	b.lastKey = append(b.lastKey[:0], key...)
	b.counter++
}

func (b *blockBuilder) finish() []byte {
	if len(b.restarts) == 0 {
		b.restarts = append(b.restarts, 0) // an empty block still has one
	}
	for _, r := range b.restarts {
		b.buf = binary.LittleEndian.AppendUint32(b.buf, r)
	}
	return binary.LittleEndian.AppendUint32(b.buf, uint32(len(b.restarts)))
}

func (b *blockBuilder) reset() {
	b.buf = b.buf[:0]
	b.restarts = b.restarts[:0]
	b.counter = 0
	b.lastKey = b.lastKey[:0]
}
