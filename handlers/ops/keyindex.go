package ops

import (
	"github.com/starwire/starwire/internal/idindex"
)

// A keyIndex maps the keys of a hashShard to their rows; h is always the
// key's spread hash (keyCodec.spread). Integer keys use open addressing
// (idindex): a slot of 16 bytes per key, at most 3/4 full, found in one
// cache miss where a Go map's groups cost more memory and more misses;
// string keys use a Go map.
type keyIndex[K tableKey] interface {
	// home loads the index's memory where a search for a key of hash h
	// starts, so that a later find of it is cached, and returns what it
	// read.
	home(h uint64) int64
	find(k K, h uint64) (int32, bool)
	// add records k, which is not in the index, at row r.
	add(k K, h uint64, r int32)
	// move records that k, which is in the index, is now at row r.
	move(k K, h uint64, r int32)
	// remove deletes k, which is in the index.
	remove(k K, h uint64)
}

// intIndex is the keyIndex of int32 and int64 keys, whose spread hash is
// idindex.Hash.
type intIndex struct{ x idindex.Index }

func newIntIndex(n int) keyIndex[int64] { return &intIndex{x: idindex.New(n)} }

func (ix *intIndex) home(h uint64) int64                  { return ix.x.Home(h) }
func (ix *intIndex) find(k int64, h uint64) (int32, bool) { return ix.x.Find(k, h) }
func (ix *intIndex) add(k int64, h uint64, r int32)       { ix.x.Insert(k, h, r) }
func (ix *intIndex) move(k int64, h uint64, r int32)      { ix.x.SetRow(k, h, r) }
func (ix *intIndex) remove(k int64, h uint64)             { ix.x.Remove(k, h) }

// mapIndex is the keyIndex of string keys: a Go map.
type mapIndex[K tableKey] map[K]int32

func newMapIndex[K tableKey](n int) keyIndex[K] { return make(mapIndex[K], n) }

func (m mapIndex[K]) home(uint64) int64 { return 0 }

func (m mapIndex[K]) find(k K, _ uint64) (int32, bool) {
	r, ok := m[k]
	return r, ok
}
func (m mapIndex[K]) add(k K, _ uint64, r int32)  { m[k] = r }
func (m mapIndex[K]) move(k K, _ uint64, r int32) { m[k] = r }
func (m mapIndex[K]) remove(k K, _ uint64)        { delete(m, k) }
