package clustercmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/internal/vethnet"
)

// A task is a "starwire serve" the cluster command started in a
// host's namespace.
type task struct {
	host   host
	cmd    *exec.Cmd
	log    string        // its standard output and error
	exited chan struct{} // closed once it has been waited for
	err    error         // its exit, once exited is closed
}

// readyTimeout bounds how long a task has to say it serves.
const readyTimeout = 30 * time.Second

// start starts serve in every ps and worker host, logging to
// serve-<tag>.log in the host's directory, and waits until each says it
// serves; unless mode is off, each carries its calls to its peers over
// AF_XDP on its host's link (serve --afxdp_iface, with --afxdp on when
// mode is). Detached tasks outlive this process ("up"); the others die
// with it.
func (c *testCluster) start(ctx context.Context, mode flags.AFXDP, detached bool) error {
	afxdp := mode != flags.AFXDPOff
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	tag := "tcp"
	if afxdp {
		tag = "afxdp"
	}
	for _, h := range c.Hosts {
		if h.Job == "chief" {
			continue
		}
		args := []string{"serve", "--report", "0"}
		if afxdp {
			ticket, err := c.packetTicket()
			if err != nil {
				return err
			}
			args = append(args, "--afxdp_iface", vethnet.HostLink, "--packet_ticket_file", ticket)
			if mode == flags.AFXDPOn {
				args = append(args, "--afxdp", "on")
			}
		}
		t, err := c.startProcess(h, exe, args, "serve-"+tag+".log", detached)
		if err != nil {
			return err
		}
		c.tasks = append(c.tasks, t)
	}
	return c.waitServing(ctx)
}

// startProcess starts exe with args in h's namespace and directory.
func (c *testCluster) startProcess(h host, exe string, args []string, logName string, detached bool) (*task, error) {
	env, err := c.env(h)
	if err != nil {
		return nil, err
	}
	t := &task{host: h, log: filepath.Join(c.dir, h.Name, logName), exited: make(chan struct{})}
	out, err := os.Create(t.log)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child has its own copy
	cmd := exec.Command(exe, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = filepath.Dir(t.log), env, out, out
	if detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Its own process group, so that a terminal's Ctrl-C reaches this
		// process alone, which stops the tasks in order; and killed should
		// this process die without doing so.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	// A process is born in the namespace of the thread that forks it.
	if err := c.seg.Do(h.Name, cmd.Start); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", h.task(), h.NS, err)
	}
	t.cmd = cmd
	go func() {
		t.err = cmd.Wait()
		close(t.exited)
	}()
	return t, nil
}

// servingLine is what serve prints once it serves.
var servingLine = regexp.MustCompile(`(?m)^\S+ serving: .*$`)

// waitServing waits until every task has printed its serving line, and
// fails if one exits first or readyTimeout passes.
func (c *testCluster) waitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		waiting := 0
		for _, t := range c.tasks {
			if t.servingLine() != "" {
				continue
			}
			select {
			case <-t.exited:
				return fmt.Errorf("%s on %s exited before serving (%v): %s", t.host.task(), t.host.Name, t.err, t.tail())
			default:
			}
			waiting++
		}
		if waiting == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d tasks not serving: %w", waiting, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// servingLine returns the task's serving line, or "" before it has said it.
func (t *task) servingLine() string {
	data, _ := os.ReadFile(t.log)
	return servingLine.FindString(string(data))
}

// fallback returns why the task serves its peer calls over TCP though
// asked for AF_XDP, or "".
func (t *task) fallback() string {
	_, why, ok := strings.Cut(t.servingLine(), "(fallback: ")
	if !ok {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSpace(why), ")")
}

// tail returns the last lines of the task's log, on one line.
func (t *task) tail() string {
	f, err := os.Open(t.log)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 3 {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return "(no output)"
	}
	return strings.Join(lines, " | ")
}

// stopTasks sends SIGTERM to the tasks this process started and waits
// for them to exit, SIGKILL after stopGrace.
func (c *testCluster) stopTasks() error {
	for _, t := range c.tasks {
		t.cmd.Process.Signal(syscall.SIGTERM)
	}
	var errs []error
	for _, t := range c.tasks {
		select {
		case <-t.exited:
		case <-time.After(stopGrace):
			t.cmd.Process.Kill()
			<-t.exited
			errs = append(errs, fmt.Errorf("%s ignored SIGTERM for %v: killed", t.host.task(), stopGrace))
		}
	}
	c.tasks = nil
	return errors.Join(errs...)
}

// packetTicket returns the file holding the ticket the cluster's tasks open
// packet sessions under, made on first use, readable by its owner only.
func (c *testCluster) packetTicket() (string, error) {
	path := filepath.Join(c.dir, "packet-ticket")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.WriteFile(path, []byte(afxdp.NewTicket().String()+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("cluster %s: packet ticket: %w", c.Name, err)
	}
	return path, nil
}
