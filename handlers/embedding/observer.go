package embedding

// An Observer hears of the changes to a table that a row's version does
// not show: rows evicted, and rows written from outside the update path
// (Restore, Apply) with versions of their own. A change stream is one
// (package embedding/changes): it must send evicted ids, and must send the
// whole table again after a restore.
//
// Both methods are called with the lock of the shard they concern held
// (Replaced by Restore with every shard's lock held), so that what they record is
// ordered with the updates of those rows; they must be quick and must not
// call the table.
type Observer interface {
	// Evicted is called with the ids of rows Evict removed from one
	// shard. ids is valid only during the call.
	Evicted(ids []int64)
	// Replaced is called when Restore or Apply wrote rows.
	Replaced()
}

// Observe sets the table's observer (nil: none). Changes made while it
// is being set may be reported to the old one.
func (t *Table) Observe(o Observer) {
	if o == nil {
		t.observer.Store(nil)
		return
	}
	t.observer.Store(&o)
}

// observing returns the table's observer, nil for none.
func (t *Table) observing() Observer {
	if o := t.observer.Load(); o != nil {
		return *o
	}
	return nil
}

// Remove deletes the rows of ids, with their slots, skipping ids without a
// row, and returns how many it removed: a follower of a change stream
// applying another table's evictions. It tells no Observer.
func (t *Table) Remove(ids []int64) int {
	n := 0
	t.each(ids, false, func(sh *shard, i int, _ int32) {
		// Look again: an earlier id of the call may have moved this row.
		if r, ok := sh.idx.find(ids[i], mix(uint64(ids[i]))); ok {
			t.drop(sh, r)
			n++
		}
	})
	return n
}
