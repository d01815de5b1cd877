package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The address kinds a task registers: the cluster (gRPC) address, and the
// starwire worker-service address that grpc+seastar needs.
const (
	AddrGRPC = "grpc"
	AddrStar = "star"
)

// DefaultWait bounds Wait when its context has no deadline.
// Batch schedulers can start a job's tasks minutes apart, so it is long;
// give the context a deadline to choose another bound.
const DefaultWait = 10 * time.Minute

// ErrIncomplete is returned (wrapped, with the context's error) when
// Wait gives up before every expected task has registered.
var ErrIncomplete = errors.New("cluster incomplete")

// Polling intervals of Wait: quick at first, when a local test or a
// small job is nearly complete, then slower so that hundreds of waiting
// tasks do not hammer a shared file system.
const (
	registryPollMin = 10 * time.Millisecond
	registryPollMax = 500 * time.Millisecond
)

// registryExt ends the name of every registration file, "<job>.<task>.json".
const registryExt = ".json"

// registration is the content of one registration file.
type registration struct {
	Job   string            `json:"job"`
	Task  int               `json:"task"`
	Addrs map[string]string `json:"addrs"`
	// Owner is the process that registered, when it could tell; LeaseMS
	// its lease in milliseconds, 0 for none (see stale).
	Owner   *owner `json:"owner,omitempty"`
	LeaseMS int64  `json:"lease_ms,omitempty"`
	// Incarnation tells one Lease's registration from every other's, so
	// that a task removes or renews only its own; Since is when it
	// registered (RFC 3339). Both are set by RegisterLease alone.
	Incarnation uint64 `json:"incarnation,omitempty"`
	Since       string `json:"since,omitempty"`
}

// Register publishes the addresses of task task of job in the registry
// directory dir (created if needed), for Wait in every task to find.
// It solves the launch of a cluster whose hosts and ports a batch scheduler
// picks: each task binds its listeners on port 0, registers the addresses
// they got, and waits for the others.
//
// addrs maps an address kind (AddrGRPC, AddrStar, or a caller's own) to a
// host:port peers can dial. The file is written under a temporary name and
// renamed into place, so a reader sees all of it or none of it, also on
// network file systems with close-to-open consistency. Registering again
// replaces the task's previous addresses.
//
// The registration is valid while the calling process lives: Wait ignores
// it once that process has ended, where it can tell (the same machine and
// PID namespace); RegisterLease makes that tell everywhere. Register from
// the task's own process.
func Register(dir, job string, task int, addrs map[string]string) error {
	return register(dir, job, task, addrs, 0)
}

func register(dir, job string, task int, addrs map[string]string, lease time.Duration) error {
	return write(dir, registration{Job: job, Task: task, Addrs: addrs, Owner: thisProcess(), LeaseMS: lease.Milliseconds()})
}

// write publishes reg in dir.
func write(dir string, reg registration) error {
	job, task, addrs := reg.Job, reg.Task, reg.Addrs
	if err := checkRegistration(job, task, addrs); err != nil {
		return fmt.Errorf("cluster: register %s in %s: %w", TaskName(job, task), dir, err)
	}
	data, err := json.Marshal(reg)
	if err != nil {
		return fmt.Errorf("cluster: register %s: %w", TaskName(job, task), err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cluster: register %s: %w", TaskName(job, task), err)
	}
	if err := writeFileAtomic(filepath.Join(dir, registryFile(job, task)), data); err != nil {
		return fmt.Errorf("cluster: register %s: %w", TaskName(job, task), err)
	}
	return nil
}

func checkRegistration(job string, task int, addrs map[string]string) error {
	if err := checkJobName(job); err != nil {
		return err
	}
	if task < 0 {
		return errors.New("negative task index")
	}
	if len(addrs) == 0 {
		return errors.New("no addresses")
	}
	for _, kind := range slices.Sorted(maps.Keys(addrs)) {
		if kind == "" {
			return errors.New("empty address kind")
		}
		if err := checkAddr(addrs[kind]); err != nil {
			return fmt.Errorf("%s address: %w", kind, err)
		}
	}
	return nil
}

func registryFile(job string, task int) string {
	return job + "." + strconv.Itoa(task) + registryExt
}

// writeFileAtomic writes data to a temporary file in path's directory, whose
// name starts with '.' so readers skip it, syncs it, and renames it to path.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// writeTemp writes data to a temporary file beside path, named as
// writeFileAtomic says, synced, and returns its name.
func writeTemp(path string, data []byte) (name string, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return "", err
	}
	if err := f.Chmod(0o644); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// A Roster is a cluster as its tasks registered it.
type Roster struct {
	// Cluster holds every task's AddrGRPC address.
	Cluster Spec
	// Endpoints maps each task's AddrGRPC address to its AddrStar address,
	// for the tasks that registered one; it is the .endpoint_map of the
	// launch (Endpoints.WriteTo writes the file).
	Endpoints EndpointMap
	// Addrs holds the tasks' addresses of every kind, by kind.
	Addrs map[string]Spec
}

// Wait polls the registry directory dir until every task of jobs
// (job name -> number of tasks, indices 0..n-1) has registered, and returns
// the cluster they form. Every task must have registered an AddrGRPC
// address. Jobs registered in dir but not named in jobs are ignored.
//
// It waits until ctx is done, or DefaultWait when ctx has no
// deadline; giving up, it returns an error wrapping ErrIncomplete and
// the context's error that names the missing tasks. A registration that
// cannot be right (a task index beyond its job's count, a malformed file, a
// duplicate address) fails at once instead of waiting for the deadline.
// A task's file is read once: registrations replaced after Wait read
// them are not seen. A stale registration (its process has ended, or its
// lease ran out: see Register and RegisterLease) is ignored, and one that
// goes stale while Wait waits for others is dropped again; the error of a
// Wait that gives up says why (ErrStale).
func Wait(ctx context.Context, dir string, jobs map[string]int) (Roster, error) {
	if err := checkExpected(jobs); err != nil {
		return Roster{}, fmt.Errorf("cluster: wait for cluster in %s: %w", dir, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWait)
		defer cancel()
	}
	found := make(map[string]registration)
	ignored := make(map[string]error)
	total := 0
	for _, n := range jobs {
		total += n
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for wait := registryPollMin; ; wait = min(2*wait, registryPollMax) {
		select {
		case <-ctx.Done():
			return Roster{}, incompleteError(ctx, dir, jobs, found, ignored, total)
		case <-timer.C:
		}
		if err := scanRegistry(dir, jobs, found, ignored); err != nil {
			return Roster{}, fmt.Errorf("cluster: wait for cluster in %s: %w", dir, err)
		}
		if len(found) == total {
			recheck(dir, found, ignored)
		}
		if len(found) == total {
			r, err := buildRoster(dir, jobs, found)
			if err != nil {
				return Roster{}, fmt.Errorf("cluster: wait for cluster in %s: %w", dir, err)
			}
			return r, nil
		}
		timer.Reset(wait)
	}
}

func checkExpected(jobs map[string]int) error {
	if len(jobs) == 0 {
		return errors.New("no jobs to wait for")
	}
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		if err := checkJobName(job); err != nil {
			return err
		}
		if jobs[job] <= 0 {
			return fmt.Errorf("job %q: want a positive task count, got %d", job, jobs[job])
		}
	}
	return nil
}

// scanRegistry reads the registration files in dir not yet in found. A
// directory not yet created means no task has registered.
//
// A stale registration (see stale) is left out, and why is kept in
// ignored for the message of a Wait that gives up.
func scanRegistry(dir string, jobs map[string]int, found map[string]registration, ignored map[string]error) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, registryExt) {
			continue
		}
		job, idx, ok := strings.Cut(strings.TrimSuffix(name, registryExt), ".")
		n, expected := jobs[job]
		if _, done := found[name]; !ok || !expected || done {
			continue
		}
		task, err := strconv.Atoi(idx)
		if err != nil || task < 0 || registryFile(job, task) != name {
			continue
		}
		if task >= n {
			return fmt.Errorf("%s registered, but job %q has %d tasks", TaskName(job, task), job, n)
		}
		reg, err := readRegistration(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since ReadDir; look again next round
		}
		if err != nil {
			return err
		}
		if reg.Job != job || reg.Task != task {
			return fmt.Errorf("%s: holds %s", name, TaskName(reg.Job, reg.Task))
		}
		if err := stale(filepath.Join(dir, name), reg); err != nil {
			ignored[name] = err
			continue
		}
		delete(ignored, name)
		found[name] = reg
	}
	return nil
}

// recheck drops from found the registrations that have gone stale since
// they were read: a task that died while Wait waited for others.
func recheck(dir string, found map[string]registration, ignored map[string]error) {
	for name, reg := range found {
		if err := stale(filepath.Join(dir, name), reg); err != nil {
			delete(found, name)
			ignored[name] = err
		}
	}
}

func readRegistration(path string) (registration, error) {
	var reg registration
	data, err := os.ReadFile(path)
	if err != nil {
		return reg, err
	}
	if err := json.Unmarshal(data, &reg); err != nil {
		return reg, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	if err := checkRegistration(reg.Job, reg.Task, reg.Addrs); err != nil {
		return reg, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return reg, nil
}

func buildRoster(dir string, jobs map[string]int, found map[string]registration) (Roster, error) {
	r := Roster{Endpoints: NewEndpointMap(dir), Addrs: make(map[string]Spec)}
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		for task := range jobs[job] {
			reg := found[registryFile(job, task)]
			if _, ok := reg.Addrs[AddrGRPC]; !ok {
				return Roster{}, fmt.Errorf("%s registered no %q address", TaskName(job, task), AddrGRPC)
			}
			for _, kind := range slices.Sorted(maps.Keys(reg.Addrs)) {
				spec := r.Addrs[kind]
				if err := spec.addTask(job, task, reg.Addrs[kind]); err != nil {
					return Roster{}, fmt.Errorf("%s addresses: %w", kind, err)
				}
				r.Addrs[kind] = spec
			}
			if star, ok := reg.Addrs[AddrStar]; ok {
				if err := r.Endpoints.add(reg.Addrs[AddrGRPC], star, 0); err != nil {
					return Roster{}, fmt.Errorf("%s: %w", TaskName(job, task), err)
				}
			}
		}
	}
	r.Cluster = r.Addrs[AddrGRPC]
	return r, nil
}

func incompleteError(ctx context.Context, dir string, jobs map[string]int, found map[string]registration, ignored map[string]error, total int) error {
	var missing []string
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		for task := range jobs[job] {
			name := registryFile(job, task)
			if _, ok := found[name]; !ok {
				m := TaskName(job, task)
				if err := ignored[name]; err != nil {
					m += " (" + err.Error() + ")"
				}
				missing = append(missing, m)
			}
		}
	}
	n := len(missing)
	const show = 8
	more := ""
	if n > show {
		more = fmt.Sprintf(" and %d more", n-show)
		missing = missing[:show]
	}
	return fmt.Errorf("cluster: wait for cluster in %s: %w: %d of %d tasks not registered: %s%s: %w",
		dir, ErrIncomplete, n, total, strings.Join(missing, ", "), more, context.Cause(ctx))
}

// FreePort returns host:port with a port that was free on host for network
// ("tcp" or "udp") a moment ago: it binds port 0, reads the port the kernel
// chose, and closes the socket. Another process may take the port before
// the caller binds it, so prefer binding port 0 yourself and registering
// the listener's address (AdvertiseAddr); FreePort is for programs that
// must be told a port before they start.
func FreePort(network, host string) (string, error) {
	addr := net.JoinHostPort(host, "0")
	var bound net.Addr
	switch network {
	case "tcp", "tcp4", "tcp6":
		l, err := net.Listen(network, addr)
		if err != nil {
			return "", fmt.Errorf("cluster: free port: %w", err)
		}
		bound = l.Addr()
		l.Close()
	case "udp", "udp4", "udp6":
		c, err := net.ListenPacket(network, addr)
		if err != nil {
			return "", fmt.Errorf("cluster: free port: %w", err)
		}
		bound = c.LocalAddr()
		c.Close()
	default:
		return "", fmt.Errorf("cluster: free port: network %q: want tcp or udp", network)
	}
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return "", fmt.Errorf("cluster: free port: %w", err)
	}
	return net.JoinHostPort(host, port), nil
}

// AdvertiseAddr returns the address peers should dial to reach a socket
// bound at bound (a listener's Addr, often "[::]:41234" after binding port
// 0): host with bound's port. An empty host means bound's own IP when it is
// a specific one, else this machine's host name.
func AdvertiseAddr(host string, bound net.Addr) (string, error) {
	h, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return "", fmt.Errorf("cluster: advertise %s: %w", bound, err)
	}
	if host == "" {
		host = h
		if ip, err := netip.ParseAddr(h); err != nil || ip.IsUnspecified() {
			if host, err = os.Hostname(); err != nil {
				return "", fmt.Errorf("cluster: advertise %s: %w", bound, err)
			}
		}
	}
	addr := net.JoinHostPort(host, port)
	if err := checkAddr(addr); err != nil {
		return "", fmt.Errorf("cluster: advertise %s: %w", bound, err)
	}
	return addr, nil
}

// Deregister removes the registration of task task of job from dir when it
// still holds addrs, the addresses the caller registered: a task that stops
// takes its addresses with it, so that a later launch in the same directory
// neither waits for nor dials them. A registration that another process has
// since replaced is left alone, as is a missing one. (A replacement landing
// between the check and the removal is removed; launches that reuse a
// directory must not overlap.)
func Deregister(dir, job string, task int, addrs map[string]string) error {
	return remove(dir, job, task, func(reg registration) bool { return maps.Equal(reg.Addrs, addrs) })
}

// remove removes the registration of task task of job from dir when mine
// says it is the caller's.
func remove(dir, job string, task int, mine func(registration) bool) error {
	path := filepath.Join(dir, registryFile(job, task))
	reg, err := readRegistration(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("cluster: deregister %s: %w", TaskName(job, task), err)
	case reg.Job != job || reg.Task != task || !mine(reg):
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cluster: deregister %s: %w", TaskName(job, task), err)
	}
	return nil
}

// Lookup reads the addresses task task of job registered in dir, as Wait
// would take them, without waiting for the rest of the cluster: a task
// that restarted registers new ones. A missing registration is an error
// wrapping fs.ErrNotExist, a stale one (see Register) ErrStale.
func Lookup(dir, job string, task int) (map[string]string, error) {
	path := filepath.Join(dir, registryFile(job, task))
	reg, err := readRegistration(path)
	if err == nil && (reg.Job != job || reg.Task != task) {
		err = fmt.Errorf("%s: holds %s", filepath.Base(path), TaskName(reg.Job, reg.Task))
	}
	if err == nil {
		err = stale(path, reg)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: look %s up in %s: %w", TaskName(job, task), dir, err)
	}
	return reg.Addrs, nil
}
