package stress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
)

// ChildEnv names the variable that makes a program calling Child.Main a
// stress server; its value is the listen spec handed to Child.Listen.
const ChildEnv = "STARWIRE_STRESS_SERVER"

// childLife bounds a child whose parent keeps its standard input open.
const childLife = 30 * time.Minute

// Child says how a stress server process listens and is configured.
type Child struct {
	// Listen opens the listener for a spec; nil means TCP on the spec as
	// an address ("127.0.0.1:0").
	Listen func(spec string) (rpc.Listener, error)
	// Configure, when set, adjusts the server before it serves.
	Configure func(s *rpc.Server)
}

// Main returns at once unless ChildEnv is set; then it serves the stress
// methods, prints the listener's address as the first line of standard
// output, and exits the process when standard input closes.
func (c Child) Main() {
	spec, ok := os.LookupEnv(ChildEnv)
	if !ok {
		return
	}
	os.Exit(c.serve(spec))
}

func (c Child) serve(spec string) int {
	listen := c.Listen
	if listen == nil {
		listen = (&tcp.Transport{}).Listen
	}
	l, err := listen(spec)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stress server: %v\n", err)
		return 1
	}
	watchHeap()
	s := NewServer()
	if c.Configure != nil {
		c.Configure(s)
	}
	go s.Serve(l)
	fmt.Println(l.Addr())
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-time.After(childLife):
	}
	s.Close()
	return 0
}

// Command returns a command that runs this executable as a stress server
// listening on spec. In a test binary, Child.Main must run before the
// tests do (from TestMain or an init function).
func Command(spec string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("stress: own executable: %w", err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), ChildEnv+"="+spec)
	return cmd, nil
}

// CommandIn is Command run inside the named network namespace.
func CommandIn(netns, spec string) (*exec.Cmd, error) {
	cmd, err := Command(spec)
	if err != nil {
		return nil, err
	}
	cmd.Args = append([]string{"ip", "netns", "exec", netns}, cmd.Args...)
	cmd.Path, err = exec.LookPath("ip")
	return cmd, err
}

// A Proc is a running stress server process.
type Proc struct {
	Addr string // what the child printed: its listener's address

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	done   chan struct{} // closed when the process has been waited for
	err    error         // Wait's error, once done
}

// startTimeout bounds how long a child may take to print its address.
const startTimeout = 15 * time.Second

// Start starts cmd (from Command) and waits for its address. The child's
// standard error is kept (its tail) for Dump, and copied to echo if not nil.
func Start(cmd *exec.Cmd, echo io.Writer) (*Proc, error) {
	p := &Proc{cmd: cmd, stderr: &tailBuffer{max: 8 << 20, echo: echo}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("stress: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stress: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stress: start server: %w", err)
	}
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		s, _ := r.ReadString('\n')
		line <- strings.TrimSpace(s)
		io.Copy(io.Discard, r)
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	select {
	case p.Addr = <-line:
		if p.Addr == "" {
			p.Kill()
			return nil, fmt.Errorf("stress: server exited without an address (%v): %s", p.err, p.stderr)
		}
		return p, nil
	case <-time.After(startTimeout):
		p.Kill()
		return nil, fmt.Errorf("stress: server printed no address within %v: %s", startTimeout, p.stderr)
	}
}

// Pid returns the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Mem reads the child's resident memory.
func (p *Proc) Mem() (Mem, error) { return ReadMem(p.Pid()) }

// Signal sends sig to the child.
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited reports whether the child has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kill kills the child at once (SIGKILL, as a crash would) and waits for it.
func (p *Proc) Kill() {
	p.cmd.Process.Signal(syscall.SIGCONT) // a stopped child dies only when it runs
	p.cmd.Process.Kill()
	<-p.done
}

// Dump makes the child print every goroutine's stack (SIGQUIT, which also
// ends it) and returns its standard error's tail.
func (p *Proc) Dump() string {
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.Kill()
	}
	return p.stderr.String()
}

// Close ends the child the way it is meant to end, by closing its standard
// input, and kills it when it does not exit in time. It returns an error
// when the child failed.
func (p *Proc) Close() error {
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.Kill()
		return fmt.Errorf("stress: server did not exit when asked: %s", p.stderr)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return fmt.Errorf("stress: server: %w: %s", p.err, p.stderr)
	}
	return p.err
}

// Stderr returns the tail of what the child wrote to standard error.
func (p *Proc) Stderr() string { return p.stderr.String() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	max  int
	echo io.Writer
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.echo != nil {
		t.echo.Write(b)
	}
	t.b.Write(b)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
