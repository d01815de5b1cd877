// Package embedding holds embedding variables: tables from int64 ids to
// rows of one dimension for the ids of a sparse model, which have no
// vocabulary (64-bit hashes of feature strings, most seen once). A row is
// made on an id's first lookup, or once the id has been looked up often
// enough (admission); it keeps its lookup count and the global step of its
// last update beside its value and its optimizer's slots (an Adagrad
// accumulator, Adam's moments); and rows not updated for a number of steps, or whose
// value's norm fell below a threshold, are evicted when asked. Lookups of
// ids not yet admitted are counted exactly per id, or in a counting Bloom
// filter of bounded memory whose false-positive rate BloomFilter states.
//
// It is DeepRec's Embedding Variable, the state a ps keeps for it. The ops
// that drive it from a graph are another layer's.
//
// # Concurrency
//
// A Table is safe for concurrent use without a table-wide lock: ids are
// spread over 16 shards, each with a lock of its own, and a call takes
// each shard's lock once, for the ids that fall in it (a batched lookup
// or update holds up to three at once, for the passes it overlaps; every
// call holding more than one takes them in ascending order, so none waits
// on another in a cycle). A row's value, slots,
// count and version change together under its shard's lock, so a
// snapshot, taken shard by shard, holds for every row a value and slots
// of one moment (the class of bug DeepRec's issue 1023 reports: slots of
// rows missing from, or newer than, the values saved).
//
// # Memory
//
// A shard keeps its rows in slabs (the values in one []float32, each
// row's version and slots side by side in another, ids in an array) and
// finds them through an open-addressing index of its own, whose slot of an
// id holds its row's lookup count, so that a table of millions of rows is a few large
// allocations and a lookup or update allocates nothing per id.
// Table.BytesPerRow says what a row costs.
package embedding
