package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// A lease's registration is claimed, not just written: the check that no
// live lease holds the task and the write are one step, so that of two
// processes started for the same task at the same instant one registers
// and the other is refused with ErrHeld (read, then write, both had read
// "nobody" and both registered, the second replacing the first). The file
// is written under a temporary name and linked to its own (link(2) fails
// when the name exists, also on network file systems, where O_EXCL may
// not be atomic); readers see all of it or none of it, as with Register.
// A registration that is there and no live lease's (stale, malformed, or
// a plain Register's) is taken over only if it is still the one read: it
// is renamed aside under a name of the claim's own and compared, and one
// made meanwhile by another claim is linked back. Claims of a directory
// take its flock(2) one at a time (lockDir), as while one is aside the
// name is free to a third.
//
// On a file system without hard links (link(2) fails with EPERM or
// ENOTSUP: FAT, some FUSE and object-store mounts) that does not lock
// either, the claim is not atomic: it publishes by rename(2) once it has
// seen the name free, and two processes that both see it free in the
// same instant both register,
// the later replacing the earlier, whose lease then stops (see renew). A
// live lease seen there is still refused. Keep the registry directory on
// a file system with hard links (ext4, xfs, tmpfs, NFS) for one owner
// per task.

// claimTries bounds a claim's rounds of finding the name taken by a
// registration it may take over, taking it over and trying again.
const claimTries = 8

// claim publishes reg in dir unless a live lease holds its task: then it
// returns an error wrapping ErrHeld.
func claim(dir string, reg registration) error {
	name := TaskName(reg.Job, reg.Task)
	data, err := encodeRegistration(dir, reg)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, registryFile(reg.Job, reg.Task))
	unlock, err := lockDir(dir)
	if err != nil {
		return fmt.Errorf("cluster: register %s: %w", name, err)
	}
	defer unlock()
	for range claimTries {
		err := createExclusive(path, data)
		if !errors.Is(err, fs.ErrExist) {
			if err != nil {
				return fmt.Errorf("cluster: register %s: %w", name, err)
			}
			return nil
		}
		old, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed since: try again
		case err != nil:
			return fmt.Errorf("cluster: register %s: %w", name, err)
		}
		if held, ok := liveLease(path, old, reg); ok && held.Incarnation == reg.Incarnation {
			return nil // its own, put back by a claim that took it aside
		} else if ok {
			return fmt.Errorf("cluster: register %s in %s: %w: %s", name, dir, ErrHeld, held.holder(path))
		}
		if err := takeOver(path, old); err != nil {
			return fmt.Errorf("cluster: register %s: take over %s: %w", name, filepath.Base(path), err)
		}
	}
	return fmt.Errorf("cluster: register %s in %s: the registration changed %d times while taken over", name, dir, claimTries)
}

// liveLease reports whether data, read from path, is a live lease's
// registration of reg's task, and returns it.
func liveLease(path string, data []byte, reg registration) (registration, bool) {
	var held registration
	if json.Unmarshal(data, &held) != nil || checkRegistration(held.Job, held.Task, held.Addrs) != nil {
		return held, false
	}
	return held, held.Incarnation != 0 && held.Job == reg.Job && held.Task == reg.Task && stale(path, held) == nil
}

// encodeRegistration checks and encodes reg, and makes dir.
func encodeRegistration(dir string, reg registration) ([]byte, error) {
	name := TaskName(reg.Job, reg.Task)
	if err := checkRegistration(reg.Job, reg.Task, reg.Addrs); err != nil {
		return nil, fmt.Errorf("cluster: register %s in %s: %w", name, dir, err)
	}
	data, err := json.Marshal(reg)
	if err != nil {
		return nil, fmt.Errorf("cluster: register %s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: register %s: %w", name, err)
	}
	return data, nil
}

// createExclusive writes data to path, which must not exist: an error
// wrapping fs.ErrExist says it did.
func createExclusive(path string, data []byte) error {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	return publish(tmp, path)
}

// hardLink is link(2); tests replace it to act as a file system without
// hard links.
var hardLink = os.Link

// publish gives file tmp the name path unless path exists: an error
// wrapping fs.ErrExist says it did. Where the file system has no hard
// links it renames tmp once it finds path free, which is not atomic: a
// name made between the look and the rename is replaced.
func publish(tmp, path string) error {
	err := hardLink(tmp, path)
	if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.ENOTSUP) && !errors.Is(err, syscall.EOPNOTSUPP) {
		return err
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		if err == nil {
			return &fs.PathError{Op: "publish", Path: path, Err: fs.ErrExist}
		}
		return err
	}
	return os.Rename(tmp, path)
}

// takeOver removes path if it still holds old.
func takeOver(path string, old []byte) error {
	aside := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+strconv.FormatUint(rand.Uint64(), 36)+".aside")
	if err := os.Rename(path, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer os.Remove(aside)
	got, err := os.ReadFile(aside)
	if err == nil && bytes.Equal(got, old) {
		return nil
	}
	// Another claim's registration, made since old was read: it goes
	// back, unless a third took the name meanwhile.
	if err := publish(aside, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}
