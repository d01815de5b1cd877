package table

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

func build(t testing.TB, opts Options, keys, vals []string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, opts)
	for i := range keys {
		if err := w.Add([]byte(keys[i]), []byte(vals[i])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestTensorFlowIndex(t *testing.T) {
	data, err := os.ReadFile("testdata/tf-variables.index")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Parse("tf", data)
	if err != nil {
		t.Fatal(err)
	}
	var keys, vals []string
	for i := range tab.Len() {
		k, v := tab.At(i)
		keys, vals = append(keys, string(k)), append(vals, string(v))
	}
	if fmt.Sprint(keys) != "[ a b c]" {
		t.Fatalf("keys %q", keys)
	}
	if got := build(t, Options{}, keys, vals); !bytes.Equal(got, data) {
		t.Errorf("rewritten table differs:\n got %x\nwant %x", got, data)
	}
	if v, ok := tab.Get([]byte("b")); !ok || string(v) != vals[2] {
		t.Errorf("Get(b) = %x, %v", v, ok)
	}
	if _, ok := tab.Get([]byte("bb")); ok {
		t.Error("Get(bb) found")
	}
}

// manyKeys returns n sorted keys sharing long prefixes, and values that
// compress well or not at all.
func manyKeys(n int, compressible bool) (keys, vals []string) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		if compressible {
			keys = append(keys, fmt.Sprintf("model/layer_%04d/kernel/.ATTRIBUTES/VARIABLE_VALUE", i))
		} else {
			keys = append(keys, fmt.Sprintf("%05d", i))
		}
		v := make([]byte, 10+rng.IntN(200))
		for j := range v {
			if compressible {
				v[j] = byte('a' + j%3)
			} else {
				v[j] = byte(rng.IntN(256))
			}
		}
		vals = append(vals, string(v))
	}
	return keys, vals
}

func TestRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name         string
		opts         Options
		n            int
		compressible bool
		wantSnappy   bool
	}{
		{"empty", Options{}, 0, false, false},
		{"one block", Options{}, 100, false, false},
		{"many blocks", Options{BlockSize: 1024}, 3000, false, false},
		{"restart every key", Options{BlockSize: 512, RestartInterval: 1}, 500, false, false},
		{"snappy", Options{BlockSize: 4096, Snappy: true}, 2000, true, true},
		{"snappy refused", Options{BlockSize: 4096, Snappy: true}, 200, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys, vals := manyKeys(c.n, c.compressible)
			data := build(t, c.opts, keys, vals)
			tab, err := Parse(c.name, data)
			if err != nil {
				t.Fatal(err)
			}
			if tab.Len() != c.n {
				t.Fatalf("%d entries, want %d", tab.Len(), c.n)
			}
			for i := range c.n {
				k, v := tab.At(i)
				if string(k) != keys[i] || string(v) != vals[i] {
					t.Fatalf("entry %d = %q, want %q", i, k, keys[i])
				}
			}
			if got := countSnappy(t, data); (got > 0) != c.wantSnappy {
				t.Errorf("%d snappy blocks, want some: %v", got, c.wantSnappy)
			}
		})
	}
}

// countSnappy counts the data blocks stored compressed.
func countSnappy(t *testing.T, data []byte) int {
	footer := data[len(data)-FooterLen:]
	_, rest, _ := parseHandle(footer)
	ih, _, _ := parseHandle(rest)
	index, err := readBlock(data[:len(data)-FooterLen], ih)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	budget := uint64(1 << 30)
	iterBlock(index, &budget, func(_, hv []byte) error {
		h, _, _ := parseHandle(hv)
		if data[h.offset+h.size] == snappyCompression {
			n++
		}
		return nil
	})
	return n
}

func TestSeparators(t *testing.T) {
	for _, c := range []struct{ a, b, sep string }{
		{"abc", "abe", "abd"}, {"abc", "abd", "abc"}, {"ab", "abc", "ab"},
		{"a\xff", "b", "a\xff"}, {"helloworld", "hellozzz", "hellox"},
	} {
		if got := string(shortestSeparator([]byte(c.a), []byte(c.b))); got != c.sep {
			t.Errorf("separator(%q, %q) = %q, want %q", c.a, c.b, got, c.sep)
		}
	}
	for _, c := range []struct{ k, s string }{{"c", "d"}, {"\xff\xffa", "\xff\xffb"}, {"\xff", "\xff"}, {"", ""}} {
		if got := string(shortSuccessor([]byte(c.k))); got != c.s {
			t.Errorf("successor(%q) = %q, want %q", c.k, got, c.s)
		}
	}
}

func TestWriterRejectsUnsorted(t *testing.T) {
	w := NewWriter(&bytes.Buffer{}, Options{})
	w.Add([]byte("b"), nil)
	if err := w.Add([]byte("a"), nil); err == nil {
		t.Error("a after b accepted")
	}
	if err := w.Add([]byte("b"), nil); err == nil {
		t.Error("b twice accepted")
	}
}

// TestCorrupt: every truncation and every flipped byte of a real table is
// an error wrapping ErrCorrupt, or (a flip the checksums cannot see, in
// the footer's padding) the same entries.
func TestCorrupt(t *testing.T) {
	keys, vals := manyKeys(60, true)
	for _, opts := range []Options{{BlockSize: 1024}, {BlockSize: 1024, Snappy: true}} {
		data := build(t, opts, keys, vals)
		for n := range len(data) {
			if _, err := Parse("t", data[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated to %d: %v", n, err)
			}
		}
		for i := range data {
			bad := bytes.Clone(data)
			bad[i] ^= 0x41
			_, err := Parse("t", bad)
			// Only the footer's padding after the handles may change unseen.
			if pad := i >= len(data)-FooterLen && i < len(data)-8; err == nil && !pad {
				t.Fatalf("flip at %d of %d accepted", i, len(data))
			}
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d: %v", i, err)
			}
		}
	}
}

// TestHostileBlocks: blocks with valid checksums but impossible contents.
func TestHostileBlocks(t *testing.T) {
	entry := func(shared, unshared, vlen uint64, rest string) []byte {
		b := binary.AppendUvarint(nil, shared)
		b = binary.AppendUvarint(b, unshared)
		b = binary.AppendUvarint(b, vlen)
		return append(b, rest...)
	}
	// A chain of keys each one byte longer than the last: quadratic
	// in the block's size if keys were rebuilt without a budget.
	var chain []byte
	chain = append(chain, entry(0, 1, 0, "a")...)
	for i := 1; i < 200000; i++ {
		chain = append(chain, entry(uint64(i), 1, 0, "a")...)
	}
	for _, c := range []struct {
		name    string
		entries []byte
		restart []uint32
	}{
		{"shared beyond key", entry(5, 1, 0, "a"), []uint32{0}},
		{"huge key", entry(0, 1<<40, 0, "a"), []uint32{0}},
		{"huge value", entry(0, 1, 1<<62, "a"), []uint32{0}},
		{"bad varint", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, []uint32{0}},
		{"restart beyond", entry(0, 1, 0, "a"), []uint32{100}},
		{"no restarts", entry(0, 1, 0, "a"), nil},
		{"quadratic keys", chain, []uint32{0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := tableWithBlock(c.entries, c.restart)
			if _, err := Parse(c.name, data); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%v, want ErrCorrupt", err)
			}
		})
	}
}

// tableWithBlock builds a table whose one data block holds entries and
// restarts verbatim, with correct checksums and index.
func tableWithBlock(entries []byte, restarts []uint32) []byte {
	block := bytes.Clone(entries)
	for _, r := range restarts {
		block = binary.LittleEndian.AppendUint32(block, r)
	}
	block = binary.LittleEndian.AppendUint32(block, uint32(len(restarts)))
	var out []byte
	put := func(b []byte) handle {
		h := handle{uint64(len(out)), uint64(len(b))}
		out = append(out, b...)
		crc := ExtendCRC32C(CRC32C(b), []byte{0})
		out = append(out, 0)
		out = binary.LittleEndian.AppendUint32(out, MaskCRC(crc))
		return h
	}
	dh := put(block)
	var meta blockBuilder
	meta.interval = 16
	mh := put(meta.finish())
	var index blockBuilder
	index.interval = 1
	index.add([]byte("\xff\xff"), dh.append(nil))
	ih := put(index.finish())
	footer := mh.append(nil)
	footer = ih.append(footer)
	footer = append(footer, make([]byte, 2*maxHandleLen-len(footer))...)
	footer = binary.LittleEndian.AppendUint64(footer, Magic)
	return append(out, footer...)
}

func TestSnappyBomb(t *testing.T) {
	// A snappy block claiming 1 GiB from a few bytes.
	claim := binary.AppendUvarint(nil, 1<<30)
	var out []byte
	out = append(out, claim...)
	crc := ExtendCRC32C(CRC32C(claim), []byte{snappyCompression})
	out = append(out, snappyCompression)
	out = binary.LittleEndian.AppendUint32(out, MaskCRC(crc))
	ih := handle{0, uint64(len(claim))}
	footer := ih.append(nil)
	footer = ih.append(footer)
	footer = append(footer, make([]byte, 2*maxHandleLen-len(footer))...)
	footer = binary.LittleEndian.AppendUint64(footer, Magic)
	if _, err := Parse("bomb", append(out, footer...)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("%v, want ErrCorrupt", err)
	}
}

func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("testdata/tf-variables.index"); err == nil {
		f.Add(data)
	}
	keys, vals := manyKeys(40, true)
	f.Add(build(f, Options{BlockSize: 256, Snappy: true}, keys, vals))
	f.Add(build(f, Options{BlockSize: 256, RestartInterval: 3}, keys[:10], vals[:10]))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := Parse("fuzz", data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		// What parses must write back and parse to the same entries.
		var buf bytes.Buffer
		w := NewWriter(&buf, Options{})
		for i := range tab.Len() {
			k, v := tab.At(i)
			if err := w.Add(k, v); err != nil {
				t.Fatalf("parsed keys out of order: %v", err)
			}
			if got, ok := tab.Get(k); !ok || !bytes.Equal(got, v) {
				t.Fatalf("Get(%q) disagrees with At(%d)", k, i)
			}
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		again, err := Parse("again", buf.Bytes())
		if err != nil || again.Len() != tab.Len() {
			t.Fatalf("rewritten table: %v, %d entries of %d", err, again.Len(), tab.Len())
		}
	})
}

func BenchmarkParse(b *testing.B) {
	keys, vals := manyKeys(5000, false)
	data := build(b, Options{}, keys, vals)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("bench", data); err != nil {
			b.Fatal(err)
		}
	}
}
