package embedding

// ChangedSince returns the rows updated at version since or later (a
// row's version is the global step of its last update), as a Snapshot of
// those rows alone: what an incremental checkpoint saves between full
// ones. Like Snapshot it takes the shards one at a time, and every row's
// value, slots, count and version are of one moment. It holds no
// filtered ids: the counts of ids not yet admitted are a full
// checkpoint's.
//
// An increment is right only under two rules its saver keeps. Rows are
// evicted at full saves alone, so that no row an increment leaves out was
// removed since the full checkpoint it follows. And since is a version no
// update applied after the previous save's snapshot can be older than:
// with versions read at a step's start, the global step before that save
// began less the steps that can be in flight, as one too small saves a few
// rows twice where one too large loses updates.
func (t *Table) ChangedSince(since int64) *Snapshot {
	d := t.opts.Dim
	s := &Snapshot{Dim: d, Slots: make([][]float32, len(t.opts.Slots))}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		var freqs []int64 // by row, once a row is changed
		for r := range int32(len(sh.ids)) {
			v := *t.version(sh, r)
			if v < since {
				continue
			}
			if freqs == nil {
				freqs = t.freqs(sh, nil)
			}
			s.IDs = append(s.IDs, sh.ids[r])
			s.Freqs = append(s.Freqs, freqs[r])
			s.Versions = append(s.Versions, v)
			s.Values = append(s.Values, t.val(sh, r)...)
			for k := range s.Slots {
				s.Slots[k] = append(s.Slots[k], t.slot(sh, r, k)...)
			}
		}
		sh.mu.Unlock()
	}
	return s
}

// Apply writes the rows of an increment s into the table, making those it
// lacks and replacing the others' values, slots, counts and versions (a
// count above math.MaxUint32 is kept as that, as Restore does): a
// restore of a full checkpoint (Restore) followed by each later
// increment, oldest first. An increment that does not fit the table is
// refused before anything changes; rows are written shard by shard, so a
// concurrent lookup may see some of them before others.
func (t *Table) Apply(s *Snapshot) error {
	if err := t.check(s); err != nil {
		return err
	}
	d := t.opts.Dim
	o := orderIDs(s.IDs)
	defer o.release()
	for sn := range t.shards {
		pos := o.of(sn)
		if len(pos) == 0 {
			continue
		}
		sh := &t.shards[sn]
		sh.mu.Lock()
		if o := t.observing(); o != nil {
			o.Replaced()
		}
		for _, i := range pos {
			id, h := s.IDs[i], o.hashes[i]
			r, ok := sh.idx.find(id, h)
			if ok {
				sh.idx.setCount(id, h, count(s.Freqs[i]))
			} else {
				delete(sh.pending, id)
				r = t.add(sh, id, h, s.Freqs[i])
			}
			*t.version(sh, r) = s.Versions[i]
			copy(t.val(sh, r), s.Values[int(i)*d:])
			for k := range s.Slots {
				copy(t.slot(sh, r, k), s.Slots[k][int(i)*d:])
			}
		}
		sh.mu.Unlock()
	}
	return nil
}
