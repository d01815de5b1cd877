// Package shardpipe schedules a batched call's three passes over the
// shards of a table whose lookups miss the cache twice, once in the
// index and once in the row: the passes over one shard's part of a batch
// (load the index slots, find the rows and load them, use them) each end
// waiting on their last miss, so Run starts a shard's first pass while
// the shard before is in its second and the one before that in its third,
// and the misses of both are in flight together.
package shardpipe

// Run calls load, find and use for each shard s < n that has, in that
// order, find(s) after load(s+1) and use(s) after load(s+2) and find(s+1).
// Shards are taken in ascending order, so a caller that takes a shard's
// lock in load and releases it in use holds up to three, taken in
// ascending order.
func Run(n int, has func(s int) bool, load, find, use func(s int)) {
	for s := 0; s < n+2; s++ {
		if s < n && has(s) {
			load(s)
		}
		if p := s - 1; p >= 0 && p < n && has(p) {
			find(p)
		}
		if p := s - 2; p >= 0 && has(p) {
			use(p)
		}
	}
}
