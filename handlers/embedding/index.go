package embedding

import "github.com/starwire/starwire/internal/idindex"

// An index maps a shard's ids to their rows: an idindex.Index, whose home
// slot of an id is the low bits of its hash mix(id) (the shard is chosen
// by the high bits). The methods name the index's in the package's own
// lower case.
type index struct{ idindex.Index }

func (x *index) init(slots int) { x.Index = idindex.New(3 * slots / 4) }

func (x *index) home(h uint64) int64                        { return x.Home(h) }
func (x *index) find(id int64, h uint64) (int32, bool)      { return x.Find(id, h) }
func (x *index) findCount(id int64, h uint64) (int32, bool) { return x.FindCount(id, h) }
func (x *index) insert(id int64, h uint64, r int32)         { x.Insert(id, h, r) }
func (x *index) insertCount(id int64, h uint64, r int32, n uint32) {
	x.InsertCount(id, h, r, n)
}
func (x *index) setCount(id int64, h uint64, n uint32) { x.SetCount(id, h, n) }
func (x *index) setRow(id int64, h uint64, r int32)    { x.SetRow(id, h, r) }
func (x *index) remove(id int64, h uint64)             { x.Remove(id, h) }
