package embedding

import "fmt"

// RestoreSlot sets slot k of the rows of ids to values, len(ids)*Dim
// floats: the restore of a slot saved apart from its table's rows, as
// DeepRec saves each optimizer slot as a variable of its own. ids must be
// the table's ids, each once, so that every row's slot comes from the same
// save as its value; otherwise the call is refused and nothing changes.
// It holds every shard's lock, so no call sees a row whose slot is half
// restored.
func (t *Table) RestoreSlot(k int, ids []int64, values []float32) error {
	d := t.opts.Dim
	switch {
	case k < 0 || k >= len(t.opts.Slots):
		return fmt.Errorf("embedding: slot %d of a table of %d: %w", k, len(t.opts.Slots), ErrMismatch)
	case len(values) != len(ids)*d:
		return fmt.Errorf("embedding: %d keys but %d values of slot %d of %d: %w", len(ids), len(values), k, d, ErrMismatch)
	}
	if err := checkUnique(ids); err != nil {
		return err
	}
	for i := range t.shards {
		t.shards[i].mu.Lock()
		defer t.shards[i].mu.Unlock()
	}
	rows := 0
	for i := range t.shards {
		rows += len(t.shards[i].ids)
	}
	if rows != len(ids) {
		return fmt.Errorf("embedding: %d keys of slot %d for a table of %d rows: %w", len(ids), k, rows, ErrMismatch)
	}
	for _, id := range ids {
		h := mix(uint64(id))
		if _, ok := t.shards[shardOf(h)].idx.find(id, h); !ok {
			return fmt.Errorf("embedding: key %d of slot %d has no row: %w", id, k, ErrMismatch)
		}
	}
	for i, id := range ids {
		h := mix(uint64(id))
		sh := &t.shards[shardOf(h)]
		r, _ := sh.idx.find(id, h)
		copy(t.slot(sh, r, k), values[i*d:(i+1)*d])
	}
	return nil
}

// SlotInit returns the initial value of slot k of rows yet to be made.
func (t *Table) SlotInit(k int) float32 {
	t.shards[0].mu.Lock() // SetSlotInit writes it under every shard's lock
	defer t.shards[0].mu.Unlock()
	return t.opts.Slots[k]
}
