package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Errors of cluster configuration, wrapped with the job, task, file or line
// they concern; test them with errors.Is.
var (
	// ErrNoTask: a job or task index that the cluster does not define.
	ErrNoTask = errors.New("no such task")
	// ErrBadAddress: an address that is not host:port with a numeric port
	// in 1..65535.
	ErrBadAddress = errors.New("bad host:port")
	// ErrDuplicateAddress: two tasks (or two endpoint map lines) with the
	// same address, which cannot both listen on it.
	ErrDuplicateAddress = errors.New("duplicate address")
)

// A Spec maps job names ("ps", "worker", "chief") to the addresses of
// their tasks, with TensorFlow's semantics: a task is named by its job and
// index, /job:ps/replica:0/task:1, and a job's indices may be sparse (a
// process that knows only some of its peers). Addresses are host:port,
// unique across the cluster.
//
// The zero value is an empty cluster ready for AddTask or Set. A copy shares
// storage with the original; use Clone before changing a copy. Reading
// methods are safe for concurrent use; changing methods are not.
type Spec struct {
	jobs   map[string]map[int]string // job -> task index -> address
	owners map[string]string         // address -> task name, for duplicates
}

// NewSpec returns the cluster whose job j has tasks 0..len(jobs[j])-1
// at the given addresses, as tf.train.Spec({"ps": [...]}) does.
func NewSpec(jobs map[string][]string) (Spec, error) {
	var c Spec
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		if err := c.addJob(job, jobs[job]); err != nil {
			return Spec{}, fmt.Errorf("cluster: cluster spec: %w", err)
		}
	}
	return c, nil
}

// ParseSpec parses a cluster given on a command line, jobs separated by
// ';' and each job's task addresses, in index order, by ',':
//
//	ps=10.0.0.1:2222,10.0.0.2:2222;worker=10.0.0.3:2222
//
// Spaces around names and addresses are ignored, as is an empty job entry
// (a trailing ';'). A job given twice, a job without tasks, a bad job name
// or a bad or duplicate address is an error naming the job and task.
func ParseSpec(s string) (Spec, error) {
	var c Spec
	if err := c.Set(s); err != nil {
		return Spec{}, err
	}
	return c, nil
}

// Set adds the jobs in s, written as for ParseSpec, to c. With it a
// *Spec is a flag.Value, so a command may take the cluster in one
// flag or as a repeated one (--cluster ps=h:p --cluster worker=h:p,h:p).
// On error c is unchanged.
func (c *Spec) Set(s string) error {
	next := c.Clone()
	for entry := range strings.SplitSeq(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		job, list, ok := strings.Cut(entry, "=")
		if !ok {
			return fmt.Errorf("cluster: cluster spec %q: want job=host:port,..., no '=' in %q", shorten(s), shorten(entry))
		}
		job = strings.TrimSpace(job)
		if next.NumTasks(job) > 0 {
			return fmt.Errorf("cluster: cluster spec %q: job %q given twice", shorten(s), job)
		}
		var addrs []string
		if strings.TrimSpace(list) != "" {
			addrs = strings.Split(list, ",")
		}
		if err := next.addJob(job, addrs); err != nil {
			return fmt.Errorf("cluster: cluster spec %q: %w", shorten(s), err)
		}
	}
	*c = next
	return nil
}

func (c *Spec) addJob(job string, addrs []string) error {
	if err := checkJobName(job); err != nil {
		return err
	}
	if len(addrs) == 0 {
		return fmt.Errorf("job %q has no tasks", job)
	}
	for i, a := range addrs {
		if err := c.addTask(job, i, strings.TrimSpace(a)); err != nil {
			return err
		}
	}
	return nil
}

// AddTask defines task index task of job at addr. The job name must be a
// letter followed by letters, digits or '_' (TensorFlow's rule), the index
// not negative and not yet defined, and addr a host:port no other task has.
func (c *Spec) AddTask(job string, task int, addr string) error {
	if err := c.addTask(job, task, addr); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

func (c *Spec) addTask(job string, task int, addr string) error {
	name := TaskName(job, task)
	if err := checkJobName(job); err != nil {
		return err
	}
	if task < 0 {
		return fmt.Errorf("%s: negative task index", name)
	}
	if _, ok := c.jobs[job][task]; ok {
		return fmt.Errorf("%s: task defined twice", name)
	}
	if err := checkAddr(addr); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if other, ok := c.owners[addr]; ok {
		return fmt.Errorf("%s: %w %s, also used by %s", name, ErrDuplicateAddress, addr, other)
	}
	if c.jobs == nil {
		c.jobs = make(map[string]map[int]string)
		c.owners = make(map[string]string)
	}
	if c.jobs[job] == nil {
		c.jobs[job] = make(map[int]string)
	}
	c.jobs[job][task] = addr
	c.owners[addr] = name
	return nil
}

// Clone returns a copy of c that shares no storage with it.
func (c Spec) Clone() Spec {
	if c.jobs == nil {
		return Spec{}
	}
	out := Spec{jobs: make(map[string]map[int]string, len(c.jobs)), owners: maps.Clone(c.owners)}
	for job, tasks := range c.jobs {
		out.jobs[job] = maps.Clone(tasks)
	}
	return out
}

// TaskName returns TensorFlow's name for a task: "/job:ps/replica:0/task:1".
func TaskName(job string, task int) string {
	return "/job:" + job + "/replica:0/task:" + strconv.Itoa(task)
}

// ParseTaskName returns the job and task index of a TensorFlow task or device
// name: "/job:ps/replica:0/task:1", "/job:ps/task:1", or a device name that
// starts with one of those ("/job:ps/replica:0/task:1/device:CPU:0").
func ParseTaskName(name string) (job string, task int, err error) {
	rest, ok := strings.CutPrefix(name, "/job:")
	if !ok {
		return "", 0, fmt.Errorf("cluster: task name %q: want /job:<job>/replica:0/task:<index>", name)
	}
	job, rest, _ = strings.Cut(rest, "/")
	if err := checkJobName(job); err != nil {
		return "", 0, fmt.Errorf("cluster: task name %q: %w", name, err)
	}
	if r, ok := strings.CutPrefix(rest, "replica:"); ok {
		var replica string
		replica, rest, _ = strings.Cut(r, "/")
		if replica == "" || strings.TrimLeft(replica, "0123456789") != "" {
			return "", 0, fmt.Errorf("cluster: task name %q: bad replica %q", name, replica)
		}
	}
	r, ok := strings.CutPrefix(rest, "task:")
	if !ok {
		return "", 0, fmt.Errorf("cluster: task name %q: no task index", name)
	}
	idx, _, _ := strings.Cut(r, "/")
	task, err = strconv.Atoi(idx)
	if err != nil || task < 0 || strings.TrimLeft(idx, "0123456789") != "" {
		return "", 0, fmt.Errorf("cluster: task name %q: bad task index %q", name, idx)
	}
	return job, task, nil
}

// Lookup returns the address of a task. A job or index the cluster does not
// define is an error wrapping ErrNoTask that names the task and says which
// jobs or indices exist.
func (c Spec) Lookup(job string, task int) (string, error) {
	tasks, ok := c.jobs[job]
	if !ok {
		return "", fmt.Errorf("cluster: %s: %w: job %q not in cluster (jobs: %s)",
			TaskName(job, task), ErrNoTask, job, strings.Join(c.Jobs(), ", "))
	}
	addr, ok := tasks[task]
	if !ok {
		return "", fmt.Errorf("cluster: %s: %w: job %q has tasks %s",
			TaskName(job, task), ErrNoTask, job, describeIndices(c.TaskIndices(job)))
	}
	return addr, nil
}

// Jobs returns the job names in sorted order.
func (c Spec) Jobs() []string { return slices.Sorted(maps.Keys(c.jobs)) }

// NumTasks returns the number of tasks job defines (0 for an unknown job).
// For a sparse job it counts the defined tasks, not the highest index + 1.
func (c Spec) NumTasks(job string) int { return len(c.jobs[job]) }

// TaskIndices returns job's task indices in increasing order.
func (c Spec) TaskIndices(job string) []int { return slices.Sorted(maps.Keys(c.jobs[job])) }

// Tasks returns job's task addresses in index order.
func (c Spec) Tasks(job string) []string {
	idx := c.TaskIndices(job)
	out := make([]string, len(idx))
	for i, t := range idx {
		out[i] = c.jobs[job][t]
	}
	return out
}

// Len returns the number of tasks in all jobs.
func (c Spec) Len() int { return len(c.owners) }

// Equal reports whether c and o define the same tasks at the same addresses.
func (c Spec) Equal(o Spec) bool {
	return maps.EqualFunc(c.jobs, o.jobs, maps.Equal)
}

// dense reports whether job's indices are exactly 0..n-1.
func (c Spec) dense(job string) bool {
	for i := range len(c.jobs[job]) {
		if _, ok := c.jobs[job][i]; !ok {
			return false
		}
	}
	return true
}

// String returns c in ParseSpec's form, jobs sorted, addresses in index
// order. The indices of a sparse job are not written; use JSON for those.
func (c Spec) String() string {
	var b strings.Builder
	for i, job := range c.Jobs() {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(job)
		b.WriteByte('=')
		b.WriteString(strings.Join(c.Tasks(job), ","))
	}
	return b.String()
}

// MarshalJSON writes c as TF_CONFIG's "cluster" object: a list of addresses
// for a dense job, an object from index to address for a sparse one.
func (c Spec) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(c.jobs))
	for job, tasks := range c.jobs {
		if c.dense(job) {
			out[job] = c.Tasks(job)
			continue
		}
		sparse := make(map[string]string, len(tasks))
		for i, a := range tasks {
			sparse[strconv.Itoa(i)] = a
		}
		out[job] = sparse
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads TF_CONFIG's "cluster" object into c, each job either a
// list of addresses or, as tf.train.Spec accepts, an object from task
// index to address. On error c is unchanged.
func (c *Spec) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("cluster: %w", jsonTypeError(err, "an object of job to addresses"))
	}
	var next Spec
	for _, job := range slices.Sorted(maps.Keys(raw)) {
		if err := next.addJSONJob(job, raw[job]); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	*c = next
	return nil
}

func (c *Spec) addJSONJob(job string, v json.RawMessage) error {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '{' {
		var sparse map[string]string
		if err := json.Unmarshal(v, &sparse); err != nil {
			return fmt.Errorf("job %q: want host:port strings as the object's values, got %s", job, typeErrorKind(err))
		}
		if len(sparse) == 0 {
			return fmt.Errorf("job %q has no tasks", job)
		}
		for _, k := range slices.Sorted(maps.Keys(sparse)) {
			i, err := strconv.Atoi(k)
			if err != nil {
				return fmt.Errorf("job %q: task index %q is not an integer", job, k)
			}
			if err := c.addTask(job, i, sparse[k]); err != nil {
				return err
			}
		}
		return nil
	}
	var list []string
	if err := json.Unmarshal(v, &list); err != nil {
		if len(v) > 0 && v[0] == '[' {
			return fmt.Errorf("job %q: want host:port strings in the list, got %s", job, typeErrorKind(err))
		}
		return fmt.Errorf("job %q: want a list of host:port or an object of task index to host:port, got %s", job, typeErrorKind(err))
	}
	return c.addJob(job, list)
}

// CheckAddr reports whether addr is a host:port a peer can dial: a host
// name, an IPv4 address or a bracketed IPv6 address, and a decimal port in
// 1..65535. The error wraps ErrBadAddress and says what is wrong.
func CheckAddr(addr string) error {
	if err := checkAddr(addr); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

func checkAddr(addr string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrBadAddress, addr, why) }
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return bad(ae.Err)
		}
		return bad(err.Error())
	}
	switch {
	case host == "":
		return bad("empty host")
	case strings.Contains(host, ":"):
		if _, err := netip.ParseAddr(host); err != nil {
			return bad("bad IPv6 address")
		}
	case !validHostname(host):
		return bad("bad host name")
	}
	if port == "" || strings.TrimLeft(port, "0123456789") != "" {
		return bad("port is not a decimal number")
	}
	n, err := strconv.ParseUint(port, 10, 16)
	switch {
	case err != nil:
		return bad("port out of range")
	case n == 0:
		return bad("port 0 cannot be dialed; register the port the listener got instead")
	}
	return nil
}

// validHostname accepts letters, digits, '-', '_' and '.', which covers DNS
// names, IPv4 literals and the container host names schedulers hand out.
func validHostname(h string) bool {
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return true
}

// checkJobName applies TensorFlow's rule for job names: a letter, then
// letters, digits or '_'.
func checkJobName(job string) error {
	if job == "" {
		return errors.New("empty job name")
	}
	for i, r := range job {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '_')) {
			return fmt.Errorf("bad job name %q: want a letter, then letters, digits or '_'", job)
		}
	}
	return nil
}

// describeIndices writes sorted task indices briefly: "0-3", "1, 4", "none".
func describeIndices(idx []int) string {
	switch {
	case len(idx) == 0:
		return "none"
	case idx[len(idx)-1]-idx[0] == len(idx)-1:
		if len(idx) == 1 {
			return strconv.Itoa(idx[0])
		}
		return strconv.Itoa(idx[0]) + "-" + strconv.Itoa(idx[len(idx)-1])
	}
	s := make([]string, len(idx))
	for i, v := range idx {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}

// Subset returns the tasks of c whose job is one of jobs, sharing no
// storage with c.
func (c Spec) Subset(jobs ...string) Spec {
	var out Spec
	for _, job := range jobs {
		for t, addr := range c.jobs[job] {
			out.addTask(job, t, addr) // cannot fail: c held it
		}
	}
	return out
}
