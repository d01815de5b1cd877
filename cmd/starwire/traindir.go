package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A local train keeps its cluster's files in a temporary directory that
// it removes when it ends; a train killed by SIGKILL cannot, so each one
// records its pid there and the next one removes the directories whose
// owner is dead.
const (
	trainDirPattern = "starwire-train-"
	trainDirOwner   = "owner.pid"
	// staleTrainDirsMax bounds the directories one start looks at, so
	// that a temporary directory full of them costs a bounded start.
	staleTrainDirsMax = 64
)

// makeTrainDir makes the local cluster's directory in the temporary
// directory, its owner recorded, after removing stale ones.
func makeTrainDir() (string, error) {
	removeStaleTrainDirs(os.TempDir(), staleTrainDirsMax)
	dir, err := os.MkdirTemp("", trainDirPattern)
	if err != nil {
		return "", err
	}
	owner := filepath.Join(dir, trainDirOwner)
	if err := os.WriteFile(owner, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("record owner: %w", err)
	}
	return dir, nil
}

// removeStaleTrainDirs removes, of the first limit train directories in
// tmp, those of this user whose recorded owner process is dead; one
// without an owner file (another version's, or one whose owner is just
// starting) is left, as is one whose owner lives. It returns the
// directories removed.
func removeStaleTrainDirs(tmp string, limit int) []string {
	matches, _ := filepath.Glob(filepath.Join(tmp, trainDirPattern+"*"))
	var removed []string
	for _, dir := range matches[:min(len(matches), limit)] {
		if !ownerDead(dir) {
			continue
		}
		if err := os.RemoveAll(dir); err == nil {
			removed = append(removed, dir)
		}
	}
	return removed
}

// ownerDead reports whether dir is this user's directory and the process
// its owner file names no longer exists.
func ownerDead(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, trainDirOwner))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	// Signal 0 checks existence: ESRCH is a dead process; EPERM one that
	// lives under another user.
	return errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}
