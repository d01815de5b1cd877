package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A registration is valid while the process that made it lives. Wait
// cannot always tell: a process on another machine, or in another PID
// namespace, cannot be looked up. A registration made with RegisterLease
// says so another way: its file's modification time, renewed by its
// process, is never older than its lease; a process killed with SIGKILL
// stops renewing, and the lease runs out.

// DefaultLease is the lease of RegisterLease when given none. A
// registration older than its lease is ignored; renewals come every third
// of it, leaving room for a slow file system and clocks a little apart.
const DefaultLease = 30 * time.Second

// ErrStale is wrapped by the reasons a registration is ignored.
var ErrStale = errors.New("stale registration")

// An owner identifies the process that registered: where its PID means
// something (the boot of the kernel, the PID namespace) and, with its
// start time, which process it was, so that a PID reused since does not
// pass for it.
type owner struct {
	Boot  string `json:"boot"`
	PIDNS string `json:"pidns"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // clock ticks after boot
	// Host is the machine's name, for the messages that name an owner.
	Host string `json:"host,omitempty"`
}

var (
	selfOnce sync.Once
	self     *owner
)

// thisProcess returns the calling process's owner, or nil where /proc
// cannot tell it.
func thisProcess() *owner {
	selfOnce.Do(func() {
		boot, err1 := os.ReadFile("/proc/sys/kernel/random/boot_id")
		pidns, err2 := os.Readlink("/proc/self/ns/pid")
		start, err3 := processStart(os.Getpid())
		if errors.Join(err1, err2, err3) == nil {
			host, _ := os.Hostname()
			self = &owner{Boot: string(bytes.TrimSpace(boot)), PIDNS: pidns, PID: os.Getpid(), Start: start, Host: host}
		}
	})
	return self
}

// processStart reads when process pid started (/proc/<pid>/stat's 22nd
// field, after the command name, which may hold spaces and parentheses).
func processStart(pid int) (uint64, error) {
	start, _, err := processStat(pid)
	return start, err
}

// processStat reads when process pid started and its state (/proc/<pid>/
// stat's 3rd field: 'Z' for a zombie, a process that has ended but that
// its parent has not yet waited for).
func processStat(pid int) (start uint64, state byte, err error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	return start, f[0][0], err
}

// gone returns why the process that made reg has ended, or nil when it
// lives or cannot be looked up from here.
func (o *owner) gone() error {
	me := thisProcess()
	if o == nil || me == nil || o.Boot != me.Boot || o.PIDNS != me.PIDNS {
		return nil
	}
	start, state, err := processStat(o.PID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: process %d has ended", ErrStale, o.PID)
	case err != nil:
		return nil
	case start != o.Start:
		return fmt.Errorf("%w: process %d has ended (its PID is another's now)", ErrStale, o.PID)
	case state == 'Z' || state == 'X':
		// Killed, and not yet waited for: a task restarted at once must
		// not be refused for the lease of one that cannot renew it.
		return fmt.Errorf("%w: process %d has ended (not yet waited for by its parent)", ErrStale, o.PID)
	}
	return nil
}

// stale returns why the registration in path, reg, is to be ignored, or
// nil.
func stale(path string, reg registration) error {
	if err := reg.Owner.gone(); err != nil {
		return err
	}
	if reg.LeaseMS <= 0 {
		return nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil // gone or unreadable: the next scan says
	}
	lease := time.Duration(reg.LeaseMS) * time.Millisecond
	if age := time.Since(info.ModTime()); age > lease {
		return fmt.Errorf("%w: not renewed for %v (lease %v)", ErrStale, age.Round(time.Second), lease)
	}
	return nil
}

// A Lease keeps a registration valid while its process runs: it renews
// the registration file's modification time every third of the lease.
type Lease struct {
	dir    string
	reg    registration // what it registered, its incarnation with it
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

// ErrHeld is wrapped by RegisterLease's error when the task's registration
// belongs to a live task: one task, one owner.
var ErrHeld = errors.New("registration held by a live task")

// RegisterLease is Register with a lease (DefaultLease when 0): the
// registration stays valid while the returned Lease renews it, and Wait
// ignores it once it has gone unrenewed for the lease, as when its process
// was killed. Close the Lease when the task stops: it stops renewing and
// deregisters.
//
// A task has one owner: when the task's registration is another lease's
// that is still renewed (by a second process started for a live task, say),
// RegisterLease refuses, with an error wrapping ErrHeld that names the
// holder (host, PID, since when). The lease removes and renews only its
// own registration (its incarnation); when the file vanishes while the
// task lives, the next renewal writes it back and logs that it did, to
// slog's default logger.
func RegisterLease(dir, job string, task int, addrs map[string]string, lease time.Duration) (*Lease, error) {
	if lease <= 0 {
		lease = DefaultLease
	}
	if lease < 3*time.Millisecond {
		return nil, fmt.Errorf("cluster: register %s: lease %v too short", TaskName(job, task), lease)
	}
	reg := registration{Job: job, Task: task, Addrs: maps.Clone(addrs), Owner: thisProcess(), LeaseMS: lease.Milliseconds(),
		Incarnation: newIncarnation(), Since: time.Now().UTC().Format(time.RFC3339)}
	if err := claim(dir, reg); err != nil { // registryclaim.go
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Lease{dir: dir, reg: reg, log: slog.Default(), cancel: cancel, done: make(chan struct{})}
	go l.renew(ctx, lease/3)
	return l, nil
}

// newIncarnation returns a number no other lease's registration holds,
// but by a chance of one in 2^64.
func newIncarnation() uint64 {
	for {
		if n := rand.Uint64(); n != 0 {
			return n
		}
	}
}

// holder describes who holds reg, read from path: "host h, pid p, since
// t, renewed 3s ago".
func (reg registration) holder(path string) string {
	var parts []string
	if o := reg.Owner; o != nil {
		if o.Host != "" {
			parts = append(parts, "host "+o.Host)
		}
		parts = append(parts, "pid "+strconv.Itoa(o.PID))
	}
	if reg.Since != "" {
		parts = append(parts, "since "+reg.Since)
	}
	if info, err := os.Stat(path); err == nil {
		parts = append(parts, "renewed "+time.Since(info.ModTime()).Round(time.Second).String()+" ago")
	}
	if len(parts) == 0 {
		return "an unnamed process"
	}
	return strings.Join(parts, ", ")
}

// renew touches the registration file every interval until ctx ends, or
// until the file holds another lease's registration (its own lease ran
// out and another process registered the task): then there is nothing of
// its own to keep. A file that vanished is written back.
func (l *Lease) renew(ctx context.Context, every time.Duration) {
	defer close(l.done)
	path := filepath.Join(l.dir, registryFile(l.reg.Job, l.reg.Task))
	name := TaskName(l.reg.Job, l.reg.Task)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reg, err := readRegistration(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Claimed, as at the start: another lease may have taken
			// the task since (see claim).
			if err = claim(l.dir, l.reg); err == nil {
				l.log.Warn("cluster: the task's registration vanished while it lives; wrote it back", "task", name, "path", path)
			}
		case err == nil && reg.Incarnation != l.reg.Incarnation:
			err = fmt.Errorf("replaced by another registration (%s)", reg.holder(path))
		case err == nil:
			now := time.Now()
			err = os.Chtimes(path, now, now)
		}
		if err != nil {
			l.mu.Lock()
			l.err = fmt.Errorf("cluster: renew %s's registration: %w", name, err)
			l.mu.Unlock()
			return
		}
	}
}

// Err returns why the lease stopped being renewed, or nil while it is.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Close stops renewing and removes the lease's registration, if the file
// still holds it: another's is left alone.
func (l *Lease) Close() error {
	l.cancel()
	<-l.done
	return remove(l.dir, l.reg.Job, l.reg.Task, func(reg registration) bool { return reg.Incarnation == l.reg.Incarnation })
}
