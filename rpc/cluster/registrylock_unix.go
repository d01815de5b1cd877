//go:build unix

package cluster

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive flock(2) on the registry directory dir for
// a claim, and returns its release. Claims of a registry take it one at a
// time, so that a take-over's window, where a fresh registration of
// another claim is moved aside and linked back, is never seen by a third
// claim as a free name (it would register, and two leases would start).
// Every claim of the directory waits for it, not only those of one task:
// claims are made once a process starts, and hold it for a few file
// operations; a process that dies releases it. A file system that does
// not lock (ENOLCK, ENOTSUP, EINVAL: some network and FUSE mounts) leaves
// the claim to link(2) and the take-over's check alone.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	fd := int(f.Fd())
	for {
		err = unix.Flock(fd, unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return func() { _ = unix.Flock(fd, unix.LOCK_UN); f.Close() }, nil
	case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
		f.Close()
		return func() {}, nil
	default:
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
}
