package changes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// baseVersions returns which of vs, dir's versions, are bases. A
// manifest that does not read is taken for no base: the follower
// reports it, and it is no reason for a writer not to go on.
func baseVersions(dir string, vs []int64) []int64 {
	var bases []int64
	for _, v := range vs {
		if m, err := readManifest(dir, v); err == nil && m.Base {
			bases = append(bases, v)
		}
	}
	return bases
}

// keptFrom returns the oldest version a writer keeping keep versions
// keeps when newest is its newest and bases its bases: the newest base
// no newer than the keep-th newest version, 0 (keep all) when there is
// none or keep is 0.
func keptFrom(newest int64, keep int, bases []int64) int64 {
	if keep <= 0 {
		return 0
	}
	i, found := slices.BinarySearch(bases, newest-int64(keep)+1)
	if found {
		return bases[i]
	}
	if i == 0 {
		return 0
	}
	return bases[i-1]
}

// prune removes the versions before keptFrom, each manifest before its
// parts, so that a follower sees a version whole or not at all, and
// never sees it again; w.mu is held, and the newest version's manifest
// is written and synced, so no version removed is the only one left.
func (w *Writer) prune() error {
	from := keptFrom(w.next-1, w.keep, w.bases)
	if from <= 1 {
		return nil
	}
	vs, err := versions(w.dir)
	if err != nil {
		return err
	}
	for _, v := range vs {
		if v >= from {
			break
		}
		if err := os.Remove(filepath.Join(w.dir, manifestName(v))); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("changes: remove version %d: %w", v, err)
		}
	}
	if err := syncDir(w.dir); err != nil {
		return err
	}
	ents, err := os.ReadDir(w.dir)
	if err != nil {
		return fmt.Errorf("changes: read %s: %w", w.dir, err)
	}
	for _, e := range ents {
		if v, _, ok := partOf(e.Name()); ok && v < from {
			if err := os.Remove(filepath.Join(w.dir, e.Name())); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("changes: remove a part of version %d: %w", v, err)
			}
		}
	}
	i, _ := slices.BinarySearch(w.bases, from)
	w.bases = w.bases[i:]
	return syncDir(w.dir)
}
