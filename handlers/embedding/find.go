package embedding

import "fmt"

// Find writes the value of each id's row into out, len(ids)*Dim floats,
// as Gather does, but neither counts the lookup nor makes a row: an id
// without one reads the initializer's value. It is an evaluation's or
// inference's lookup (DeepRec's is_inference), which must leave the table
// as training left it.
func (t *Table) Find(ids []int64, out []float32) error {
	d := t.opts.Dim
	if len(out) != len(ids)*d {
		return fmt.Errorf("embedding: find of %d ids into %d floats of rows of %d: %w", len(ids), len(out), d, ErrMismatch)
	}
	t.each(ids, false, func(sh *shard, i int, r int32) {
		dst := out[i*d : (i+1)*d]
		if r < 0 {
			t.opts.Init.fill(ids[i], dst)
			return
		}
		copy(dst, t.val(sh, r))
	})
	return nil
}
