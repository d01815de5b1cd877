package staleness

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// fsPeer is the benchmark's filesystem baseline, as its authors ran it
// against shared storage: the trainer writes each version to a file of
// its own and renames it over "newest", workers open "newest" and read it
// when its version (the blob's first 8 bytes) is newer than theirs. A
// reader keeps the file it opened, so a rename while it reads does not
// tear its copy. Files are not synced: readers on this host see the page
// cache, as workers sharing a node's cache do.
type fsPeer struct {
	dir string
}

func (p fsPeer) push(_ context.Context, version uint64, blob []byte) error {
	tmp := filepath.Join(p.dir, "v"+strconv.FormatUint(version, 10))
	if err := os.WriteFile(tmp, blob, 0o644); err != nil {
		return fmt.Errorf("staleness: filesystem: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, "newest")); err != nil {
		return fmt.Errorf("staleness: filesystem: %w", err)
	}
	return nil
}

func (p fsPeer) pull(_ context.Context, have uint64, dst []byte) (uint64, bool, error) {
	f, err := os.Open(filepath.Join(p.dir, "newest"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("staleness: filesystem: %w", err)
	}
	defer f.Close()
	var stamp [8]byte
	if _, err := io.ReadFull(f, stamp[:]); err != nil {
		return 0, false, fmt.Errorf("staleness: filesystem: %w", err)
	}
	v := binary.LittleEndian.Uint64(stamp[:])
	if v <= have {
		return v, false, nil
	}
	if _, err := f.ReadAt(dst, 0); err != nil {
		return 0, false, fmt.Errorf("staleness: filesystem: read version %d: %w", v, err)
	}
	return v, true, nil
}

func (p fsPeer) wait(context.Context, uint64, []byte) (uint64, bool, error) {
	return 0, false, fmt.Errorf("%w: a directory cannot push: the filesystem protocol runs in pull mode only", ErrConfig)
}

func (fsPeer) close() {}
