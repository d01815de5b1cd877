package embedding

import (
	"testing"
	"unsafe"
)

// addressGathers returns five more of BenchmarkTable's gathers, each a
// layout whose row a lookup finds without the row number the fixed
// table's index slot holds, or with that dependence pipelined, to tell
// what a redesign of the table's index would gain:
//
//   - gather-pipelined: the index and rows of gather-fixed-rows-index,
//     worked in one pass over the batch that loads the slot of id i+2w
//     and the row of id i+w while it copies id i's (w = 16, about a
//     shard's share of a batch): the window the table's passes have,
//     rolling across the batch rather than ending at each shard's last id;
//   - gather-parallel: rows in an array parallel to the slots (the row of
//     slot i at i), open addressing over the slots' keys, so that a
//     lookup loads its home slot and its home row at once;
//   - gather-inline: the key in its row's record (key, count and version,
//     value, slot), open addressing over the records;
//   - gather-parallel-passes and gather-inline-passes: the same two in
//     two passes over the batch, every id's home record loaded before
//     any id's probe and copy.
//
// rows ids are in each, mix(p) for p < rows, as BenchmarkTable's table
// has them; slots is the slot count of the table's index.
func addressGathers(b *testing.B, rows, dim, stride int, out []float32, next func() ([]int, []int64)) (pipelined, parallel, inline, parallelPasses, inlinePasses func()) {
	b.Helper()
	// gather-fixed-rows-index's memory, rebuilt here the same way.
	data := make([]float32, rows*stride)
	for i := range data {
		data[i] = float32(i % 1000)
	}
	perShard := 8
	for 4*(rows/numShards) > 3*perShard {
		perShard *= 2
	}
	nslots := perShard * numShards
	mask := uint64(nslots - 1)
	slots := make([]int64, 2*nslots)
	for i := range slots {
		slots[i] = int64(i/2) % int64(rows)
	}
	for p := range rows {
		slots[2*(mix(uint64(mix(uint64(p))))&mask)+1] = int64(p)
	}
	// The parallel and inline layouts: nslots records each, the id
	// beside them (keys) or inside them (2 floats of room for it).
	keys := make([]int64, nslots)
	pdata := make([]float32, nslots*stride)
	istride := stride + 2
	idata := make([]float32, nslots*istride)
	for i := range pdata {
		pdata[i] = float32(i % 1000)
	}
	for i := range idata {
		idata[i] = float32(i % 1000)
	}
	ikey := func(s uint64) *int64 { return (*int64)(unsafe.Pointer(&idata[int(s)*istride])) }
	for s := range keys {
		keys[s] = -1 // no id of the benchmark's: mix is a bijection and -1 = mix(x) for one x only, not below rows
		*ikey(uint64(s)) = -1
	}
	for p := range rows {
		id := int64(mix(uint64(p)))
		s := mix(uint64(id)) & mask
		for keys[s] != -1 {
			s = (s + 1) & mask
		}
		keys[s] = id
		s = mix(uint64(id)) & mask
		for *ikey(s) != -1 {
			s = (s + 1) & mask
		}
		*ikey(s) = id
	}
	for _, m := range [][]float32{data, pdata, idata} {
		collapse(b, m)
	}
	collapse(b, slots)
	collapse(b, keys)
	const w = 16
	var hs [1024]uint64
	var rowOf [1024]int
	var sink float32
	var ksink int64
	pipelined = func() {
		_, ids := next()
		n := len(ids)
		for i := 0; i < n+2*w; i++ {
			if i < n {
				h := mix(uint64(ids[i])) & mask
				hs[i] = h
				ksink += slots[2*h]
			}
			if j := i - w; j >= 0 && j < n {
				p := int(slots[2*hs[j]+1])
				rowOf[j] = p
				sink += data[p*stride+metaFloats]
			}
			if j := i - 2*w; j >= 0 {
				p := rowOf[j]
				*(*int64)(unsafe.Pointer(&data[p*stride]))++
				copy(out[j*dim:(j+1)*dim], data[p*stride+metaFloats:])
			}
		}
	}
	parallel = func() {
		_, ids := next()
		for i, id := range ids {
			s := mix(uint64(id)) & mask
			for keys[s] != id {
				s = (s + 1) & mask
			}
			*(*int64)(unsafe.Pointer(&pdata[int(s)*stride]))++
			copy(out[i*dim:(i+1)*dim], pdata[int(s)*stride+metaFloats:])
		}
	}
	inline = func() {
		_, ids := next()
		for i, id := range ids {
			s := mix(uint64(id)) & mask
			for *ikey(s) != id {
				s = (s + 1) & mask
			}
			lo := int(s) * istride
			*(*int64)(unsafe.Pointer(&idata[lo+2]))++
			copy(out[i*dim:(i+1)*dim], idata[lo+2+metaFloats:])
		}
	}
	// The same two in two passes: load every id's home record first (for
	// parallel its key and its row, independent loads), then probe and
	// copy, as the table's passes do.
	parallelPasses = func() {
		_, ids := next()
		for i, id := range ids {
			s := mix(uint64(id)) & mask
			hs[i] = s
			ksink += keys[s]
			sink += pdata[int(s)*stride]
		}
		for i, id := range ids {
			s := hs[i]
			for keys[s] != id {
				s = (s + 1) & mask
			}
			*(*int64)(unsafe.Pointer(&pdata[int(s)*stride]))++
			copy(out[i*dim:(i+1)*dim], pdata[int(s)*stride+metaFloats:])
		}
	}
	inlinePasses = func() {
		_, ids := next()
		for i, id := range ids {
			s := mix(uint64(id)) & mask
			hs[i] = s
			ksink += *ikey(s)
		}
		for i, id := range ids {
			s := hs[i]
			for *ikey(s) != id {
				s = (s + 1) & mask
			}
			lo := int(s) * istride
			*(*int64)(unsafe.Pointer(&idata[lo+2]))++
			copy(out[i*dim:(i+1)*dim], idata[lo+2+metaFloats:])
		}
	}
	b.Cleanup(func() { _, _ = sink, ksink })
	return pipelined, parallel, inline, parallelPasses, inlinePasses
}
