package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strconv"
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
			self = &owner{Boot: string(bytes.TrimSpace(boot)), PIDNS: pidns, PID: os.Getpid(), Start: start}
		}
	})
	return self
}

// processStart reads when process pid started (/proc/<pid>/stat's 22nd
// field, after the command name, which may hold spaces and parentheses).
func processStart(pid int) (uint64, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(string(f[19]), 10, 64)
}

// gone returns why the process that made reg has ended, or nil when it
// lives or cannot be looked up from here.
func (o *owner) gone() error {
	me := thisProcess()
	if o == nil || me == nil || o.Boot != me.Boot || o.PIDNS != me.PIDNS {
		return nil
	}
	start, err := processStart(o.PID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: process %d has ended", ErrStale, o.PID)
	case err != nil:
		return nil
	case start != o.Start:
		return fmt.Errorf("%w: process %d has ended (its PID is another's now)", ErrStale, o.PID)
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
	dir, job string
	task     int
	addrs    map[string]string
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	err      error
}

// RegisterLease is Register with a lease (DefaultLease when 0): the
// registration stays valid while the returned Lease renews it, and Wait
// ignores it once it has gone unrenewed for the lease, as when its process
// was killed. Close the Lease when the task stops: it stops renewing and
// deregisters.
func RegisterLease(dir, job string, task int, addrs map[string]string, lease time.Duration) (*Lease, error) {
	if lease <= 0 {
		lease = DefaultLease
	}
	if lease < 3*time.Millisecond {
		return nil, fmt.Errorf("cluster: register %s: lease %v too short", TaskName(job, task), lease)
	}
	if err := register(dir, job, task, addrs, lease); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Lease{dir: dir, job: job, task: task, addrs: maps.Clone(addrs), cancel: cancel, done: make(chan struct{})}
	go l.renew(ctx, lease/3)
	return l, nil
}

// renew touches the registration file every interval until ctx ends, or
// until the file no longer holds the lease's addresses (replaced by
// another process, or removed): then there is nothing of its own to keep.
func (l *Lease) renew(ctx context.Context, every time.Duration) {
	defer close(l.done)
	path := filepath.Join(l.dir, registryFile(l.job, l.task))
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reg, err := readRegistration(path)
		if err == nil && !maps.Equal(reg.Addrs, l.addrs) {
			err = errors.New("replaced by another registration")
		}
		if err == nil {
			now := time.Now()
			err = os.Chtimes(path, now, now)
		}
		if err != nil {
			l.mu.Lock()
			l.err = fmt.Errorf("cluster: renew %s's registration: %w", TaskName(l.job, l.task), err)
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

// Close stops renewing and deregisters (see Deregister).
func (l *Lease) Close() error {
	l.cancel()
	<-l.done
	return Deregister(l.dir, l.job, l.task, l.addrs)
}
