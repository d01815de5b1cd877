package table

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/golang/snappy"
)

// maxSnappyRatio bounds how much a snappy block may claim to expand: the
// format's densest element, a 3-byte copy of 64 bytes, expands 21.3 times,
// so a larger claim is corrupt and is refused before anything is allocated.
const maxSnappyRatio = 22

// A Table is a parsed table held in memory: its keys, sorted, and values.
// Values are views into the table's bytes (or a decompressed block) and
// must not be modified. Safe for concurrent reads.
type Table struct {
	keys [][]byte
	vals [][]byte
}

// Parse reads every block of the table in data, checking checksums and key
// order. name is used in errors. Memory used is bounded by a small multiple
// of len(data), whatever the bytes claim.
func Parse(name string, data []byte) (*Table, error) {
	if len(data) < FooterLen {
		return nil, fmt.Errorf("table %s: %d bytes, shorter than the footer: %w", name, len(data), ErrCorrupt)
	}
	footer := data[len(data)-FooterLen:]
	if m := binary.LittleEndian.Uint64(footer[2*maxHandleLen:]); m != Magic {
		return nil, fmt.Errorf("table %s: bad magic %#x: %w", name, m, ErrCorrupt)
	}
	metaH, rest, ok := parseHandle(footer)
	if !ok {
		return nil, fmt.Errorf("table %s: footer metaindex handle: %w", name, ErrCorrupt)
	}
	indexH, _, ok := parseHandle(rest)
	if !ok {
		return nil, fmt.Errorf("table %s: footer index handle: %w", name, ErrCorrupt)
	}
	body := data[:len(data)-FooterLen]
	// The metaindex is empty in TensorFlow's tables and TensorFlow never
	// reads it; its checksum is checked all the same, so that no byte of a
	// damaged index goes unnoticed.
	if _, err := readBlock(body, metaH); err != nil {
		return nil, fmt.Errorf("table %s: metaindex block: %w", name, err)
	}
	index, err := readBlock(body, indexH)
	if err != nil {
		return nil, fmt.Errorf("table %s: index block: %w", name, err)
	}
	t := &Table{}
	// Prefix compression lets a few bytes stand for a long key, so a
	// hostile block could make the keys rebuilt from it quadratic in its
	// size. A writer restarting every 16 keys, as TensorFlow's does, never
	// needs more than 16 bytes of key per byte of table.
	budget := 16*uint64(len(data)) + 1<<20
	var prevSep []byte
	err = iterBlock(index, &budget, func(sep, hv []byte) error {
		if prevSep != nil && bytes.Compare(sep, prevSep) <= 0 {
			return fmt.Errorf("index key %q after %q: %w", sep, prevSep, ErrCorrupt)
		}
		prevSep = sep
		h, _, ok := parseHandle(hv)
		if !ok {
			return fmt.Errorf("index entry %q: bad block handle: %w", sep, ErrCorrupt)
		}
		block, err := readBlock(body, h)
		if err != nil {
			return fmt.Errorf("data block at %d: %w", h.offset, err)
		}
		return iterBlock(block, &budget, func(k, v []byte) error {
			if n := len(t.keys); n > 0 && bytes.Compare(k, t.keys[n-1]) <= 0 {
				return fmt.Errorf("key %q after %q: %w", k, t.keys[n-1], ErrCorrupt)
			}
			if bytes.Compare(k, sep) > 0 {
				return fmt.Errorf("key %q beyond its block's index key %q: %w", k, sep, ErrCorrupt)
			}
			t.keys = append(t.keys, k)
			t.vals = append(t.vals, v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", name, err)
	}
	return t, nil
}

// Len returns the number of entries.
func (t *Table) Len() int { return len(t.keys) }

// At returns the i'th entry in key order.
func (t *Table) At(i int) (key, value []byte) { return t.keys[i], t.vals[i] }

// Get returns the value under key.
func (t *Table) Get(key []byte) ([]byte, bool) {
	i := sort.Search(len(t.keys), func(i int) bool { return bytes.Compare(t.keys[i], key) >= 0 })
	if i < len(t.keys) && bytes.Equal(t.keys[i], key) {
		return t.vals[i], true
	}
	return nil, false
}

// readBlock returns the contents of the block at h in body, checked and
// decompressed.
func readBlock(body []byte, h handle) ([]byte, error) {
	if h.offset > uint64(len(body)) || h.size > uint64(len(body))-h.offset ||
		uint64(len(body))-h.offset-h.size < trailerLen {
		return nil, fmt.Errorf("block [%d, +%d) outside %d bytes: %w", h.offset, h.size, len(body), ErrCorrupt)
	}
	b := body[h.offset : h.offset+h.size+trailerLen]
	contents, typ := b[:h.size], b[h.size]
	want := UnmaskCRC(binary.LittleEndian.Uint32(b[h.size+1:]))
	if got := ExtendCRC32C(CRC32C(contents), b[h.size:h.size+1]); got != want {
		return nil, fmt.Errorf("block at %d: crc32c %#08x, trailer says %#08x: %w", h.offset, got, want, ErrCorrupt)
	}
	switch typ {
	case noCompression:
		return contents, nil
	case snappyCompression:
		n, err := snappy.DecodedLen(contents)
		if err != nil || n > maxSnappyRatio*len(contents) {
			return nil, fmt.Errorf("block at %d: snappy length %d from %d bytes: %w", h.offset, n, len(contents), ErrCorrupt)
		}
		out, err := snappy.Decode(make([]byte, n), contents)
		if err != nil {
			return nil, fmt.Errorf("block at %d: snappy: %v: %w", h.offset, err, ErrCorrupt)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("block at %d: compression type %d: %w", h.offset, typ, ErrCorrupt)
	}
}

// iterBlock calls fn with each entry of block in order. Keys are fresh
// slices (prefix compression means they are rebuilt); values are views.
// Rebuilt key bytes are taken from *budget; running out is an error.
func iterBlock(block []byte, budget *uint64, fn func(k, v []byte) error) error {
	if len(block) < 4 {
		return fmt.Errorf("block of %d bytes: %w", len(block), ErrCorrupt)
	}
	nr := binary.LittleEndian.Uint32(block[len(block)-4:])
	if nr == 0 || uint64(nr) > uint64(len(block)-4)/4 {
		return fmt.Errorf("block of %d bytes with %d restarts: %w", len(block), nr, ErrCorrupt)
	}
	limit := len(block) - 4 - 4*int(nr)
	for i := range int(nr) {
		if r := binary.LittleEndian.Uint32(block[limit+4*i:]); uint64(r) > uint64(limit) {
			return fmt.Errorf("restart %d at %d beyond %d bytes of entries: %w", i, r, limit, ErrCorrupt)
		}
	}
	entries := block[:limit]
	var key []byte
	for off := 0; off < len(entries); {
		shared, n1 := binary.Uvarint(entries[off:])
		if n1 <= 0 {
			return fmt.Errorf("entry at %d: bad shared length: %w", off, ErrCorrupt)
		}
		unshared, n2 := binary.Uvarint(entries[off+n1:])
		if n2 <= 0 {
			return fmt.Errorf("entry at %d: bad key length: %w", off, ErrCorrupt)
		}
		vlen, n3 := binary.Uvarint(entries[off+n1+n2:])
		if n3 <= 0 {
			return fmt.Errorf("entry at %d: bad value length: %w", off, ErrCorrupt)
		}
		p := off + n1 + n2 + n3
		avail := uint64(len(entries) - p)
		if shared > uint64(len(key)) || unshared > avail || vlen > avail-unshared {
			return fmt.Errorf("entry at %d: lengths %d+%d+%d exceed the block: %w", off, shared, unshared, vlen, ErrCorrupt)
		}
		if shared+unshared > *budget {
			return fmt.Errorf("entry at %d: keys rebuilt to over 16 bytes per table byte: %w", off, ErrCorrupt)
		}
		*budget -= shared + unshared
		k := make([]byte, 0, shared+unshared)
		k = append(k, key[:shared]...)
		k = append(k, entries[p:p+int(unshared)]...)
		key = k
		p += int(unshared)
		if err := fn(k, entries[p:p+int(vlen):p+int(vlen)]); err != nil {
			return err
		}
		off = p + int(vlen)
	}
	return nil
}
