package changes

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/starwire/starwire/handlers/embedding"
)

// ErrExists is returned by Export when the version it was to write has a
// manifest: another writer exports into the directory.
var ErrExists = errors.New("changes: the version exists")

// DefaultKeep is the versions a writer of the commands keeps by default
// (serve and train --stream_keep).
const DefaultKeep = 100

// WriterOptions say what a writer keeps; the zero value keeps every
// version.
type WriterOptions struct {
	// Keep, when positive, is how many of the newest versions are kept
	// at least: once a version is written, the versions before the newest
	// base no newer than the Keep-th newest are removed, so that what is
	// kept always starts at a base a new follower can start at. To bound
	// what is kept, every Keep-th version is a base (the tables in full),
	// so that between Keep and 2*Keep-1 versions are kept.
	Keep int
}

// A Writer exports the changes of the tables it tracks into a directory,
// a version per Export. Safe for concurrent use; Exports run one at a
// time.
type Writer struct {
	dir    string
	token  string // in the names of its parts
	keep   int
	mu     sync.Mutex // serializes Track and Export
	next   int64      // the version the next Export writes
	tables []*tracked // by name
	bases  []int64    // the base versions in dir, oldest first
	// lastUpto is the upto of the last Export, exported says there was
	// one: an Export at the same upto has nothing to add (see Export).
	lastUpto int64
	exported bool
}

// A tracked table is one the writer exports, with what its observer
// heard since the last export.
type tracked struct {
	name  string
	t     *embedding.Table
	since int64 // rows updated at since or later are the next export's

	mu      sync.Mutex
	evicted []int64
	full    bool // send every row: new to the stream, or restored
}

func (tr *tracked) Evicted(ids []int64) {
	tr.mu.Lock()
	tr.evicted = append(tr.evicted, ids...)
	tr.mu.Unlock()
}

func (tr *tracked) Replaced() {
	tr.mu.Lock()
	tr.full, tr.evicted = true, nil
	tr.mu.Unlock()
}

// take returns and clears what the observer heard.
func (tr *tracked) take() (full bool, evicted []int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	full, evicted = tr.full, tr.evicted
	tr.full, tr.evicted = false, nil
	return full, evicted
}

// putBack returns what take took, for an export that failed.
func (tr *tracked) putBack(full bool, evicted []int64) {
	tr.mu.Lock()
	tr.full = tr.full || full
	if !tr.full {
		tr.evicted = append(evicted, tr.evicted...)
	}
	tr.mu.Unlock()
}

// NewWriter returns a writer into dir that keeps every version
// (NewWriterWithOptions with the zero options).
func NewWriter(dir string) (*Writer, error) {
	return NewWriterWithOptions(dir, WriterOptions{})
}

// NewWriterWithOptions returns a writer into dir, made if missing, that
// goes on after the newest version there. Files of a version without a
// manifest (an export that did not finish) are removed.
func NewWriterWithOptions(dir string, o WriterOptions) (*Writer, error) {
	if o.Keep < 0 {
		return nil, fmt.Errorf("changes: keep %d versions, want >= 0", o.Keep)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("changes: make %s: %w", dir, err)
	}
	vs, err := versions(dir)
	if err != nil {
		return nil, err
	}
	var tok [8]byte
	rand.Read(tok[:])
	w := &Writer{dir: dir, token: hex.EncodeToString(tok[:]), keep: o.Keep, next: 1}
	if len(vs) > 0 {
		w.next = vs[len(vs)-1] + 1
	}
	if o.Keep > 0 { // what is kept starts at a base
		w.bases = baseVersions(dir, vs)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("changes: read %s: %w", dir, err)
	}
	for _, e := range ents {
		name := e.Name()
		if v, _, ok := partOf(name); ok && v >= w.next || strings.HasSuffix(name, ".tmp") {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return nil, fmt.Errorf("changes: remove an unfinished export: %w", err)
			}
		}
	}
	return w, nil
}

// Next returns the version the next Export writes.
func (w *Writer) Next() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// Track adds table t to the export under name, observing it (a table
// has one observer: a table is tracked by one writer). Its first export
// holds all its rows. Tracking the table a name has is nothing; another
// table under it (a variable made again) takes its place, sent in full.
func (w *Writer) Track(name string, t *embedding.Table) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i, found := slices.BinarySearchFunc(w.tables, name, func(tr *tracked, n string) int { return strings.Compare(tr.name, n) })
	if found && w.tables[i].t == t {
		return
	}
	tr := &tracked{name: name, t: t, full: true}
	t.Observe(tr)
	if found {
		w.tables[i] = tr
		return
	}
	w.tables = slices.Insert(w.tables, i, tr)
}

// Export writes the next version: for each tracked table the rows
// updated since the previous export and the ids evicted, or all its rows
// if it is new to the stream or was restored, then the manifest. It
// writes nothing, and returns nil, when no table changed, or when the
// previous Export had the same upto and no table is new or restored: the
// tasks of one process that share the writer export in the same round
// at the same upto, and the first wrote every table's changes (what
// changed since has a version no older than upto, and goes in the next
// version). Once a version is written, versions older than what
// WriterOptions.Keep keeps are removed; a version written whose elders
// could not be removed is returned with the error.
//
// upto is where the next version begins: no update not yet applied may
// have a version (global step) older than it, so it is the global step
// at the export's start less the steps that can be in flight. One too
// small sends a few rows twice, one too large loses updates.
func (w *Writer) Export(upto int64) (*Manifest, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.exported && upto == w.lastUpto && !w.anyFull() {
		return nil, nil
	}
	v := w.next
	// Every keep-th version a base, so that what prune keeps is bounded.
	rebase := w.keep > 0 && len(w.bases) > 0 && v-w.bases[len(w.bases)-1] >= int64(w.keep)
	w.lastUpto, w.exported = upto, true
	m := &Manifest{Version: v, Base: len(w.tables) > 0, Since: upto, Upto: upto, Parts: []PartInfo{}}
	type taken struct {
		tr      *tracked
		full    bool
		evicted []int64
	}
	var took []taken
	fail := func(err error) (*Manifest, error) {
		for _, t := range took {
			t.tr.putBack(t.full, t.evicted)
		}
		for _, p := range m.Parts {
			os.Remove(filepath.Join(w.dir, p.File))
		}
		return nil, err
	}
	for _, tr := range w.tables {
		full, evicted := tr.take()
		took = append(took, taken{tr, full, evicted})
		p := &Part{Full: full || rebase, Evicted: evicted}
		if p.Full {
			p.Rows, p.Evicted = tr.t.Snapshot(), nil
			p.Rows.FilteredIDs, p.Rows.FilteredFreqs, p.Rows.Bloom = nil, nil, nil
		} else {
			p.Rows = tr.t.ChangedSince(tr.since)
			m.Base = false
		}
		if !p.Full && len(p.Rows.IDs) == 0 && len(evicted) == 0 {
			continue
		}
		m.Since = min(m.Since, tr.since)
		info, err := w.writePart(v, len(m.Parts), tr.name, p)
		if err != nil {
			return fail(err)
		}
		m.Parts = append(m.Parts, info)
	}
	if len(m.Parts) == 0 {
		w.advance(upto)
		return nil, nil
	}
	if err := w.publish(m); err != nil {
		return fail(err)
	}
	w.advance(upto)
	w.next++
	if m.Base {
		w.bases = append(w.bases, v)
	}
	return m, w.prune()
}

// anyFull says whether a tracked table is to be sent in full; w.mu is
// held.
func (w *Writer) anyFull() bool {
	for _, tr := range w.tables {
		tr.mu.Lock()
		full := tr.full
		tr.mu.Unlock()
		if full {
			return true
		}
	}
	return false
}

// advance moves every table's since to upto.
func (w *Writer) advance(upto int64) {
	for _, tr := range w.tables {
		tr.since = max(tr.since, upto)
	}
}

// writePart writes part k of version v, synced, and says what it holds.
func (w *Writer) writePart(v int64, k int, table string, p *Part) (PartInfo, error) {
	b := AppendPart(nil, p)
	name := partName(v, k, w.token)
	if err := writeFile(filepath.Join(w.dir, name), b); err != nil {
		return PartInfo{}, fmt.Errorf("changes: version %d, table %s: %w", v, table, err)
	}
	return PartInfo{Table: table, File: name, Bytes: int64(len(b)), CRC32C: crc32.Checksum(b, castagnoli),
		Full: p.Full, Rows: int64(len(p.Rows.IDs)), Evicted: int64(len(p.Evicted))}, nil
}

// publish writes m's manifest: to a temporary file, synced, then linked
// to its name, which fails if the version has one, and the directory
// synced, so that a manifest is seen whole or not at all and once.
func (w *Writer) publish(m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("changes: version %d: %w", m.Version, err)
	}
	final := filepath.Join(w.dir, manifestName(m.Version))
	tmp := final + ".tmp"
	if err := writeFile(tmp, append(b, '\n')); err != nil {
		return fmt.Errorf("changes: version %d: %w", m.Version, err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, final); errors.Is(err, os.ErrExist) {
		return fmt.Errorf("changes: version %d in %s: %w", m.Version, w.dir, ErrExists)
	} else if err != nil {
		return fmt.Errorf("changes: publish version %d: %w", m.Version, err)
	}
	return syncDir(w.dir)
}

// writeFile writes b to path and syncs it.
func writeFile(path string, b []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir syncs directory dir, so that the names made in it last.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("changes: sync %s: %w", dir, err)
	}
	return nil
}
