package changes

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"

	"github.com/starwire/starwire/handlers/embedding"
)

// ErrGap is wrapped by the errors of a stream a follower cannot replay
// in order: a version missing between two others, no base to start at,
// or a table whose first part does not hold it in full.
var ErrGap = errors.New("changes: a gap in the stream")

// ErrMissingPart is wrapped by the error of a version whose manifest
// names a part the directory lacks or holds at another size.
var ErrMissingPart = errors.New("changes: a part is missing")

// ErrBehind is wrapped by the error of a follower that needs a version
// the writer no longer keeps (WriterOptions.Keep): it fell behind, and
// can only start again from a base, a full copy of the tables.
var ErrBehind = errors.New("changes: the follower fell behind the versions kept")

// A Follower replays a directory's versions into tables of its own, in
// order, each once. Not safe for concurrent use; its tables are, for
// lookups while it applies.
type Follower struct {
	dir     string
	applied int64 // the newest version applied, 0 for none
	// resume, until the first poll, is the version a follower made by
	// NewFollowerAfter had applied before it restarted.
	resume int64
	tables map[string]*embedding.Table
}

// Applied says what a version changed.
type Applied struct {
	Version     int64
	Base        bool
	Since, Upto int64
	Tables      []TableApplied
}

// TableApplied says what a version changed in one table: rows written,
// ids evicted (of those, Removed had a row), and rows after.
type TableApplied struct {
	Name                   string
	Full                   bool
	Rows, Evicted, Removed int
	Total                  int
}

// NewFollower returns a follower of dir that has applied nothing.
func NewFollower(dir string) *Follower {
	return &Follower{dir: dir, tables: map[string]*embedding.Table{}}
}

// NewFollowerAfter returns a follower of dir that had applied every
// version up to v, 0 for none, before it restarted (its position kept
// across restarts): its first poll makes its tables again, quietly, from
// the newest base no newer than v through v (or from v+1 if that is a
// base), and reports the versions after v, so that each is reported
// once across restarts.
func NewFollowerAfter(dir string, v int64) *Follower {
	f := NewFollower(dir)
	f.resume = v
	return f
}

// Version returns the newest version applied, 0 for none.
func (f *Follower) Version() int64 { return f.applied }

// Table returns the table replayed under name, nil if the stream has none.
func (f *Follower) Table(name string) *embedding.Table { return f.tables[name] }

// Tables returns the names of the tables replayed, sorted.
func (f *Follower) Tables() []string {
	names := make([]string, 0, len(f.tables))
	for n := range f.tables {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Poll applies every version after the last applied, oldest first; a
// follower that has applied none starts at the newest base. It stops at
// the first version it cannot apply, which it leaves unapplied, and
// returns what it applied before it with the error.
func (f *Follower) Poll() ([]Applied, error) {
	var done []Applied
	err := f.PollEach(func(a Applied) error {
		done = append(done, a)
		return nil
	})
	return done, err
}

// PollEach is Poll calling each after each version applied, before the
// next: an error from each stops the poll and is returned.
func (f *Follower) PollEach(each func(Applied) error) error {
	vs, err := versions(f.dir)
	if err != nil {
		return err
	}
	switch {
	case f.applied == 0 && f.resume > 0:
		if err := f.rebuild(vs); err != nil {
			f.applied, f.tables = 0, map[string]*embedding.Table{} // the next poll tries again
			return err
		}
		vs = vs[sortedAfter(vs, f.applied):]
	case f.applied == 0 && len(vs) > 0:
		start, err := f.newestBase(vs, vs[len(vs)-1])
		if err != nil {
			return err
		}
		vs = vs[slices.Index(vs, start):]
	default:
		vs = vs[sortedAfter(vs, f.applied):]
	}
	for _, v := range vs {
		if f.applied != 0 && v != f.applied+1 {
			if err := f.behind(); err != nil {
				return err
			}
			return fmt.Errorf("changes: version %d follows %d in %s: %w", v, f.applied, f.dir, ErrGap)
		}
		a, err := f.apply(v)
		if err != nil {
			if b := f.behind(); b != nil && (errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrMissingPart)) {
				return b // removed while it was read
			}
			return err
		}
		if err := each(a); err != nil {
			return err
		}
	}
	return nil
}

// behind returns the error of a follower that needs a version older
// than the oldest in its directory, nil if it does not.
func (f *Follower) behind() error {
	vs, err := versions(f.dir)
	if err != nil || len(vs) == 0 || vs[0] <= f.applied+1 {
		return nil
	}
	return fmt.Errorf("changes: the follower needs version %d of %s, which holds versions %d to %d (the writer keeps its newest alone): "+
		"it fell behind; start it again from the newest base, a full copy of the tables: %w", f.applied+1, f.dir, vs[0], vs[len(vs)-1], ErrBehind)
}

// rebuild makes a follower made by NewFollowerAfter(dir, p) hold what it
// held at p: it applies, without reporting them, the versions from the
// newest base no newer than p through p, or none when p+1 is a base.
func (f *Follower) rebuild(vs []int64) error {
	p := f.resume
	switch {
	case len(vs) == 0 || vs[len(vs)-1] < p:
		newest := int64(0)
		if len(vs) > 0 {
			newest = vs[len(vs)-1]
		}
		return fmt.Errorf("changes: the follower had applied version %d, and the newest in %s is %d: not the stream it followed: %w", p, f.dir, newest, ErrGap)
	case vs[0] > p+1:
		return f.behindAt(p, vs)
	}
	if i := sortedAfter(vs, p); i < len(vs) && vs[i] == p+1 {
		if m, err := readManifest(f.dir, p+1); err == nil && m.Base {
			f.applied, f.resume = p, 0
			return nil
		}
	}
	start, err := f.newestBase(vs, p)
	if errors.Is(err, ErrGap) {
		return f.behindAt(p, vs)
	} else if err != nil {
		return err
	}
	for _, v := range vs[slices.Index(vs, start):sortedAfter(vs, p)] {
		if f.applied != 0 && v != f.applied+1 {
			return fmt.Errorf("changes: version %d follows %d in %s: %w", v, f.applied, f.dir, ErrGap)
		}
		if _, err := f.apply(v); err != nil {
			return fmt.Errorf("changes: make the follower's tables again to version %d: %w", p, err)
		}
	}
	if f.applied != p {
		return fmt.Errorf("changes: version %d, the follower's last, is not in %s: %w", p, f.dir, ErrGap)
	}
	f.resume = 0
	return nil
}

// behindAt is the error of a follower at p that restarts and finds no
// base to make its tables again from.
func (f *Follower) behindAt(p int64, vs []int64) error {
	return fmt.Errorf("changes: the follower had applied version %d of %s, which holds versions %d to %d, no base at or before %d to make its tables again from (the writer keeps its newest alone): "+
		"it fell behind; start it again from the newest base, a full copy of the tables: %w", p, f.dir, vs[0], vs[len(vs)-1], p, ErrBehind)
}

// sortedAfter returns the index of the first of vs after v.
func sortedAfter(vs []int64, v int64) int {
	i, found := slices.BinarySearch(vs, v)
	if found {
		i++
	}
	return i
}

// newestBase returns the newest base version of vs no newer than upto.
func (f *Follower) newestBase(vs []int64, upto int64) (int64, error) {
	for i := sortedAfter(vs, upto) - 1; i >= 0; i-- {
		m, err := readManifest(f.dir, vs[i])
		if err != nil {
			return 0, err
		}
		if m.Base {
			return vs[i], nil
		}
	}
	return 0, fmt.Errorf("changes: no base version in %s to start at: %w", f.dir, ErrGap)
}

// apply applies version v, reading and checking every part before it
// changes any table.
func (f *Follower) apply(v int64) (Applied, error) {
	m, err := readManifest(f.dir, v)
	if err != nil {
		return Applied{}, err
	}
	parts := make([]*Part, len(m.Parts))
	for k, info := range m.Parts {
		if parts[k], err = f.readPart(v, info); err != nil {
			return Applied{}, err
		}
	}
	a := Applied{Version: v, Base: m.Base, Since: m.Since, Upto: m.Upto}
	for k, info := range m.Parts {
		a.Tables = append(a.Tables, f.applyPart(info.Table, parts[k]))
	}
	f.applied = v
	return a, nil
}

// readPart reads, checks and decodes a part the manifest of v describes
// as info, and checks it fits the follower's table of its name.
func (f *Follower) readPart(v int64, info PartInfo) (*Part, error) {
	b, err := os.ReadFile(filepath.Join(f.dir, info.File))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("changes: version %d names part %s of table %s, which is not in %s: %w", v, info.File, info.Table, f.dir, ErrMissingPart)
	case err != nil:
		return nil, fmt.Errorf("changes: version %d: %w", v, err)
	case int64(len(b)) != info.Bytes:
		return nil, fmt.Errorf("changes: version %d: part %s is %d bytes, the manifest says %d: %w", v, info.File, len(b), info.Bytes, ErrMissingPart)
	}
	if sum := crc32.Checksum(b, castagnoli); sum != info.CRC32C {
		return nil, fmt.Errorf("changes: version %d: part %s of table %s has checksum %08x, the manifest says %08x: %w", v, info.File, info.Table, sum, info.CRC32C, ErrCorrupt)
	}
	p, err := DecodePart(b)
	if err != nil {
		return nil, fmt.Errorf("changes: version %d, part %s: %w", v, info.File, err)
	}
	if p.Full != info.Full || int64(len(p.Rows.IDs)) != info.Rows || int64(len(p.Evicted)) != info.Evicted {
		return nil, fmt.Errorf("changes: version %d: part %s disagrees with the manifest on what it holds: %w", v, info.File, ErrCorrupt)
	}
	if err := checkUnique(p.Rows.IDs); err != nil {
		return nil, fmt.Errorf("changes: version %d, part %s: %w", v, info.File, err)
	}
	t := f.tables[info.Table]
	switch {
	case t == nil && !p.Full:
		return nil, fmt.Errorf("changes: version %d holds changes of table %s, whose rows the follower never had in full: %w", v, info.Table, ErrGap)
	case t != nil && (t.Dim() != p.Rows.Dim || t.Slots() != len(p.Rows.Slots)):
		return nil, fmt.Errorf("changes: version %d: table %s has rows of %d with %d slots, its part %d and %d: %w",
			v, info.Table, t.Dim(), t.Slots(), p.Rows.Dim, len(p.Rows.Slots), ErrCorrupt)
	}
	return p, nil
}

// checkUnique reports an id a part holds twice.
func checkUnique(ids []int64) error {
	s := slices.Clone(ids)
	slices.Sort(s)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return fmt.Errorf("changes: id %d twice: %w", s[i], ErrCorrupt)
		}
	}
	return nil
}

// applyPart writes a checked part into the table of its name, which it
// makes for a full part of a table it lacks.
func (f *Follower) applyPart(name string, p *Part) TableApplied {
	ta := TableApplied{Name: name, Full: p.Full, Rows: len(p.Rows.IDs), Evicted: len(p.Evicted)}
	t := f.tables[name]
	if t == nil {
		// A new table's dimension and slots are checked; nothing fails.
		t, _ = embedding.New(embedding.Options{Dim: p.Rows.Dim, Slots: make([]float32, len(p.Rows.Slots))})
		f.tables[name] = t
	}
	// readPart checked what Restore and Apply check, so neither fails.
	if p.Full {
		_ = t.Restore(p.Rows)
	} else {
		ta.Removed = t.Remove(p.Evicted)
		_ = t.Apply(p.Rows)
	}
	ta.Total = t.Len()
	return ta
}
