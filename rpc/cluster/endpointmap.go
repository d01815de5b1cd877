package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"strings"
)

// DefaultEndpointMapFile is the endpoint map read from the working directory
// when TF_SEASTAR_ENDPOINT_MAP_PATH is unset.
const DefaultEndpointMapFile = ".endpoint_map"

// ErrNoStarAddr is returned (wrapped) when the endpoint map has no starwire
// address for a task's gRPC address.
var ErrNoStarAddr = errors.New("no starwire address")

// maxEndpointLine bounds one line of an endpoint map; a longer line is an
// error rather than an unbounded allocation.
const maxEndpointLine = 4096

// An EndpointMap gives, for each task's gRPC address (the one in the cluster
// spec), the address of its starwire worker service. Under grpc+seastar a
// task keeps gRPC for the master service and serves the worker service on
// the second address, so every task needs an entry.
//
// Its file form, ".endpoint_map", has one task a line:
//
//	# grpc address = starwire address
//	127.0.0.1:3333=127.0.0.1:5555
//	127.0.0.1:4444 = 127.0.0.1:6666   # worker 1
//
// Spaces around addresses are ignored; blank lines and everything from '#'
// to the end of a line are comments. Addresses are compared as written
// ("localhost:3333" and "127.0.0.1:3333" are different keys), as the
// cluster spec's addresses are. A gRPC address given twice, or two tasks
// given the same starwire address, is an error: neither can be meant.
//
// The zero value is an empty map. A copy shares storage with the original.
// Reading methods are safe for concurrent use; Add is not.
type EndpointMap struct {
	name   string                  // where it came from, for messages
	star   map[string]endpointLine // gRPC address -> starwire address
	byStar map[string]endpointLine // starwire address -> gRPC address
	order  []string                // gRPC addresses as added
}

type endpointLine struct {
	addr string
	line int // 0 when added by Add
}

// A ParseError reports a malformed line of a configuration file, naming the
// file and the line (counted from 1).
type ParseError struct {
	Name string // file name, or what the text was read from
	Line int
	Text string // the line, trimmed and shortened
	Err  error
}

func (e *ParseError) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("cluster: %s:%d: %v", e.Name, e.Line, e.Err)
	}
	return fmt.Sprintf("cluster: %s:%d: %q: %v", e.Name, e.Line, e.Text, e.Err)
}

// Unwrap returns the cause, so errors.Is(err, ErrBadAddress) and friends work.
func (e *ParseError) Unwrap() error { return e.Err }

// NewEndpointMap returns an empty map whose errors call it name.
func NewEndpointMap(name string) EndpointMap { return EndpointMap{name: name} }

// LoadEndpointMap reads the endpoint map named by TF_SEASTAR_ENDPOINT_MAP_PATH,
// or .endpoint_map in the working directory when the variable is unset. A
// missing file is an error wrapping fs.ErrNotExist.
func LoadEndpointMap() (EndpointMap, error) {
	path := getenv(EnvEndpointMapPath)
	from := "$" + EnvEndpointMapPath
	if path == "" {
		path, from = DefaultEndpointMapFile, "the working directory (or set $"+EnvEndpointMapPath+")"
	}
	m, err := ReadEndpointMap(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, fmt.Errorf("%w; grpc+seastar reads the endpoint map from %s", err, from)
	}
	return m, err
}

// ReadEndpointMap reads the endpoint map file at path.
func ReadEndpointMap(path string) (EndpointMap, error) {
	f, err := os.Open(path)
	if err != nil {
		return EndpointMap{}, fmt.Errorf("cluster: endpoint map: %w", err)
	}
	defer f.Close()
	return ParseEndpointMap(path, f)
}

// ParseEndpointMap reads an endpoint map in its file form from r; name is
// used in errors, which are *ParseError values naming the line.
func ParseEndpointMap(name string, r io.Reader) (EndpointMap, error) {
	m := NewEndpointMap(name)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxEndpointLine)
	n := 0
	for sc.Scan() {
		n++
		text := sc.Text()
		if n == 1 {
			text = strings.TrimPrefix(text, "\uFEFF")
		}
		if err := m.addLine(text, n); err != nil {
			return EndpointMap{}, &ParseError{Name: name, Line: n, Text: shorten(strings.TrimSpace(text)), Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line longer than %d bytes", maxEndpointLine)
			return EndpointMap{}, &ParseError{Name: name, Line: n + 1, Err: err}
		}
		return EndpointMap{}, fmt.Errorf("cluster: endpoint map %s: %w", name, err)
	}
	return m, nil
}

func (m *EndpointMap) addLine(text string, n int) error {
	if i := strings.IndexByte(text, '#'); i >= 0 {
		text = text[:i]
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	grpc, star, ok := strings.Cut(text, "=")
	if !ok {
		return errors.New("missing '=', want grpcHost:port=starHost:port")
	}
	if strings.Contains(star, "=") {
		return errors.New("more than one '='")
	}
	return m.add(strings.TrimSpace(grpc), strings.TrimSpace(star), n)
}

// Add maps grpcAddr to starAddr, with the checks a file line gets.
func (m *EndpointMap) Add(grpcAddr, starAddr string) error {
	if err := m.add(grpcAddr, starAddr, 0); err != nil {
		return fmt.Errorf("cluster: endpoint map %s: %w", m.Name(), err)
	}
	return nil
}

func (m *EndpointMap) add(grpc, star string, line int) error {
	if err := checkAddr(grpc); err != nil {
		return fmt.Errorf("gRPC address: %w", err)
	}
	if err := checkAddr(star); err != nil {
		return fmt.Errorf("starwire address: %w", err)
	}
	if prev, ok := m.star[grpc]; ok {
		return fmt.Errorf("gRPC address: %w %s%s", ErrDuplicateAddress, grpc, onLine(prev.line))
	}
	if prev, ok := m.byStar[star]; ok {
		return fmt.Errorf("starwire address: %w %s, also given for %s%s", ErrDuplicateAddress, star, prev.addr, onLine(prev.line))
	}
	if m.star == nil {
		m.star = make(map[string]endpointLine)
		m.byStar = make(map[string]endpointLine)
	}
	m.star[grpc] = endpointLine{star, line}
	m.byStar[star] = endpointLine{grpc, line}
	m.order = append(m.order, grpc)
	return nil
}

func onLine(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (first on line %d)", n)
}

// Name returns what the map was read from, as its errors say.
func (m EndpointMap) Name() string {
	if m.name == "" {
		return "(unnamed)"
	}
	return m.name
}

// Len returns the number of entries.
func (m EndpointMap) Len() int { return len(m.order) }

// Lookup returns the starwire address for a gRPC address; an address the
// map lacks is an error wrapping ErrNoStarAddr.
func (m EndpointMap) Lookup(grpcAddr string) (starAddr string, err error) {
	e, ok := m.star[grpcAddr]
	if !ok {
		return "", fmt.Errorf("cluster: %w for %s in endpoint map %s", ErrNoStarAddr, grpcAddr, m.Name())
	}
	return e.addr, nil
}

// StarAddr returns the starwire address of a task of spec. The error
// names the task and its gRPC address, as
// "/job:ps/replica:0/task:1 (127.0.0.1:3333)", and wraps ErrNoTask or
// ErrNoStarAddr.
func (m EndpointMap) StarAddr(spec Spec, job string, task int) (string, error) {
	grpc, err := spec.Lookup(job, task)
	if err != nil {
		return "", err
	}
	e, ok := m.star[grpc]
	if !ok {
		return "", fmt.Errorf("cluster: %s (%s): %w in endpoint map %s", TaskName(job, task), grpc, ErrNoStarAddr, m.Name())
	}
	return e.addr, nil
}

// GRPCOnly reports whether job's tasks are TensorFlow processes reached
// over gRPC under grpc+seastar: a job other than ps and worker (the jobs
// whose WorkerService starwire serves) of which the map has no task, such
// as the client job of a TensorFlow master whose feeds workers pull.
func (m EndpointMap) GRPCOnly(spec Spec, job string) bool {
	if job == "ps" || job == "worker" {
		return false
	}
	for _, t := range spec.TaskIndices(job) {
		grpc, _ := spec.Lookup(job, t)
		if _, ok := m.star[grpc]; ok {
			return false
		}
	}
	return true
}

// CheckCluster reports every task of spec the map has no entry for, in
// one error wrapping ErrNoStarAddr, so a misconfigured launch fails at start
// rather than at its first call to the missing task. The tasks of GRPCOnly
// jobs need none.
func (m EndpointMap) CheckCluster(spec Spec) error {
	var missing []string
	for _, job := range spec.Jobs() {
		if m.GRPCOnly(spec, job) {
			continue
		}
		for _, t := range spec.TaskIndices(job) {
			grpc, _ := spec.Lookup(job, t)
			if _, ok := m.star[grpc]; !ok {
				missing = append(missing, TaskName(job, t)+" ("+grpc+")")
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	total := len(missing)
	const show = 8
	more := ""
	if total > show {
		more = fmt.Sprintf(" and %d more", total-show)
		missing = missing[:show]
	}
	return fmt.Errorf("cluster: %w in endpoint map %s for %d of %d tasks: %s%s",
		ErrNoStarAddr, m.Name(), total, spec.Len(), strings.Join(missing, ", "), more)
}

// All yields the entries, gRPC address then starwire address, in the order
// they were read or added.
func (m EndpointMap) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, g := range m.order {
			if !yield(g, m.star[g].addr) {
				return
			}
		}
	}
}

// WriteTo writes m in its file form, which ParseEndpointMap reads back.
func (m EndpointMap) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	for g, s := range m.All() {
		b.WriteString(g)
		b.WriteByte('=')
		b.WriteString(s)
		b.WriteByte('\n')
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// shorten keeps error messages readable when a line is long.
func shorten(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
