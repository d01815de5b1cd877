package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/rpc/cluster"
)

// runBinary runs the built command with extra environment variables and
// returns its exit status and output.
func runBinary(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildBinary(t), args...)
	cmd.Env = append(append(os.Environ(), "TF_CONFIG="), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// A process is the built command running in the background, its standard
// output read line by line.
type process struct {
	cmd    *exec.Cmd
	lines  chan string
	out    bytes.Buffer // everything, for failure messages
	stderr bytes.Buffer
}

func startBinary(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(buildBinary(t), args...), lines: make(chan string, 1024)}
	p.cmd.Env = append(append(os.Environ(), "TF_CONFIG="), env...)
	p.cmd.Stderr = &p.stderr
	r, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(io.TeeReader(r, &p.out))
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	return p
}

// waitLine returns the first line of output matching re, failing t after
// timeout.
func (p *process) waitLine(t *testing.T, re *regexp.Regexp, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("output ended without a line matching %v:\n%s\nstderr:\n%s", re, p.out.String(), p.stderr.String())
			}
			if re.MatchString(line) {
				return line
			}
		case <-deadline:
			t.Fatalf("no line matching %v after %v:\n%s", re, timeout, p.out.String())
		}
	}
}

// stop sends sig and waits for the process to end, returning its status.
func (p *process) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	p.cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() {
		for range p.lines {
		}
		p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("did not stop on %v:\n%s", sig, p.out.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// TestHelpListsEnvironment: every command's -h lists the variables it
// reads, with what each accepts and its default, and shows float defaults
// as they were written.
func TestHelpListsEnvironment(t *testing.T) {
	for cmd, names := range commandEnv {
		code, out, _ := runMain(t, cmd, "-h")
		if code != 0 {
			t.Errorf("%s -h: exit %d", cmd, code)
		}
		if len(names) == 0 {
			if strings.Contains(out, "environment:") {
				t.Errorf("%s reads no variables but lists some:\n%s", cmd, out)
			}
			continue
		}
		if !strings.Contains(out, "\nenvironment:\n") {
			t.Errorf("%s -h has no environment section:\n%s", cmd, out)
		}
		for _, name := range names {
			v, _ := cluster.LookupEnvVar(name)
			if !strings.Contains(out, "  "+name+"\n") || !strings.Contains(out, v.Accepts+" (default "+v.Default+")") {
				t.Errorf("%s -h does not describe %s:\n%s", cmd, name, out)
			}
		}
	}
	for _, cmd := range []string{"train", "serve"} {
		_, out, _ := runMain(t, cmd, "-h")
		for _, name := range []string{cluster.EnvCoreNumber, cluster.EnvPSPolling, cluster.EnvWorkerDisablePin, cluster.EnvPSCoreNumber, cluster.EnvTFConfig} {
			if !strings.Contains(out, name) {
				t.Errorf("%s -h does not list %s", cmd, name)
			}
		}
	}
	_, out, _ := runMain(t, "train", "-h")
	if !strings.Contains(out, "Adagrad learning rate, a positive float (default 0.2)") {
		t.Errorf("train -h shows the learning rate's default as a float64 of a float32:\n%s", out)
	}
	if !strings.Contains(out, "the driver's calls stay on --transport") {
		t.Errorf("train -h does not say how --afxdp and --transport relate:\n%s", out)
	}
	// A bad variable does not stand between a user and the help that
	// says what it accepts.
	t.Setenv(cluster.EnvCoreNumber, "abc")
	if code, out, _ := runMain(t, "train", "-h"); code != 0 || !strings.Contains(out, cluster.EnvCoreNumber) {
		t.Errorf("train -h with a bad SEASTAR_CORE_NUMBER: exit %d", code)
	}
}

// TestReactorCountShown: the reactor counts in use are printed with where
// they came from, and a per-role count above the task's connections is
// lowered, as DeepRec does, with a one-line warning.
func TestReactorCountShown(t *testing.T) {
	code, out, errOut := runBinary(t, []string{"SEASTAR_CORE_NUMBER=2", "NETWORK_PS_CORE_NUMBER=16"},
		"train", "--afxdp", "off", "--steps", "10", "--vocab", "1000", "--held_out", "256")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"reactors: driver 2 (SEASTAR_CORE_NUMBER=2)",
		"each ps task 3 (NETWORK_PS_CORE_NUMBER=16, capped at 3 connections)",
		"each worker task 2 (SEASTAR_CORE_NUMBER=2)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	warn := "starwire: train: warning: NETWORK_PS_CORE_NUMBER=16 is more than the task's 3 connections; using 3 reactors\n"
	if errOut != warn {
		t.Errorf("stderr %q, want %q", errOut, warn)
	}
}

// TestSignalStopsTrain: SIGTERM stops a training run with one line saying
// so and the shell's status for it, 128+15.
func TestSignalStopsTrain(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	p := startBinary(t, nil, "train", "--afxdp", "off", "--steps", "1000000", "--vocab", "1000", "--held_out", "256", "--progress", "100ms")
	p.waitLine(t, regexp.MustCompile(`^step \d+/`), 30*time.Second)
	if code := p.stop(t, syscall.SIGTERM); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	if got := p.stderr.String(); got != "starwire: train: stopped by SIGTERM\n" {
		t.Errorf("stderr %q", got)
	}
}

// TestStdoutClosed: train | head -1 ends the run when its output goes away,
// with SIGPIPE's status, after removing its temporary directory and
// endpoint map (the signal itself used to kill it first).
func TestStdoutClosed(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	tmp := t.TempDir()
	cmd := exec.Command(buildBinary(t), "train", "--afxdp", "off", "--steps", "1000000", "--vocab", "1000", "--held_out", "256", "--progress", "50ms")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "TF_CONFIG=")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v", err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) == 0 {
		t.Fatalf("no temporary directory while training (first line %q)", line)
	}
	r.Close() // head -1 exits
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("train kept running with its output gone")
	}
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGPIPE) {
		t.Errorf("exit %d (%v), want %d; stderr %q", code, cmd.ProcessState, 128+int(syscall.SIGPIPE), stderr.String())
	}
	entries, _ := os.ReadDir(tmp)
	for _, e := range entries {
		t.Errorf("left behind: %s", filepath.Join(tmp, e.Name()))
	}
}

// TestServeSaysWhatItServes: a grpc task does not claim a starwire
// address, and an interface without AF_XDP gives one reason, not two.
func TestServeSaysWhatItServes(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	spec := "ps=" + freePort(t) + ";worker=" + freePort(t)
	p := startBinary(t, nil, "serve", "--job", "ps", "--protocol", "grpc", "--cluster", spec)
	line := p.waitLine(t, regexp.MustCompile(`serving:`), 20*time.Second)
	p.stop(t, syscall.SIGTERM)
	if strings.Contains(line, "(none)") || strings.Contains(line, "starwire") || !strings.Contains(line, "peer calls over gRPC") {
		t.Errorf("grpc task: %q", line)
	}

	grpc1, grpc2 := freePort(t), freePort(t)
	emap := filepath.Join(t.TempDir(), "endpoint_map")
	if err := os.WriteFile(emap, []byte(grpc1+"="+freePort(t)+"\n"+grpc2+"="+freePort(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p = startBinary(t, nil, "serve", "--job", "ps", "--cluster", "ps="+grpc1+";worker="+grpc2, "--endpoint_map", emap, "--afxdp_iface", "lo")
	line = p.waitLine(t, regexp.MustCompile(`serving:`), 20*time.Second)
	p.stop(t, syscall.SIGTERM)
	if strings.Contains(line, flags.NoIfaceGiven) || strings.Count(line, "fallback") != 1 || !strings.Contains(line, "AF_XDP on lo") {
		t.Errorf("serve --afxdp_iface lo: %q", line)
	}
	if !strings.Contains(line, "reactors 2 (default, capped at 2 connections)") {
		t.Errorf("serve does not say how many reactors it runs: %q", line)
	}
}

// unprivileged returns a command running the built binary as a user
// without capabilities: nobody, by way of setpriv, when the tests run as
// root.
func unprivileged(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	bin := buildBinary(t)
	if os.Geteuid() != 0 {
		return exec.Command(bin, args...)
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv (util-linux) is needed to run the command unprivileged")
	}
	return exec.Command(setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--", bin}, args...)...)
}

// TestUnprivileged runs what needs root as a user without it: one line
// says why, with no Go panic (train --afxdp on) and no raw errors of the
// namespace calls (staleness --protocol afxdp).
func TestUnprivileged(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--afxdp", "on", "--steps", "10"}, "starwire: train: start local cluster: --afxdp on needs root (network namespaces and AF_XDP sockets): "},
		{[]string{"staleness", "--protocol", "afxdp", "--duration", "100ms"}, "starwire: staleness: --protocol afxdp: " + flags.NoRoot + "\n"},
	} {
		cmd := unprivileged(t, tc.args...)
		cmd.Env = append(os.Environ(), "TF_CONFIG=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if cmd.ProcessState == nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if code := cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("%v: exit %d, want 1; stderr %q", tc.args, code, stderr.String())
		}
		if got := stderr.String(); !strings.HasPrefix(got, tc.want) || strings.Count(got, "\n") != 1 || strings.Contains(got, "panic") {
			t.Errorf("%v: stderr %q, want one line starting %q", tc.args, got, tc.want)
		}
	}
}

// TestREADMEConfiguration: the README's Configuration table lists every
// variable with the default and accepted values the commands use.
func TestREADMEConfiguration(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "## Configuration")
	if start < 0 {
		t.Fatal("README has no Configuration section")
	}
	section := text[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	for _, v := range cluster.EnvVars {
		row := "| `" + v.Name + "` | " + v.Default + " | " + v.Accepts + " | "
		if !strings.Contains(section, row) {
			t.Errorf("the Configuration table has no row starting %q", row)
		}
	}
}

func TestQueueHint(t *testing.T) {
	bind := fmt.Errorf("afxdp: open va queue 1: %w: %w", fmt.Errorf("xsk: bind ifindex 3 queue 1: %w", syscall.EINVAL), link.ErrUnavailable)
	if h := queueHint(bind); !strings.Contains(h, "numrxqueues 1 numtxqueues 1") {
		t.Errorf("no hint for %v", bind)
	}
	if h := queueHint(fmt.Errorf("afxdp: interface lo has no Ethernet address: %w", link.ErrUnavailable)); h != "" {
		t.Errorf("a hint for another failure: %q", h)
	}
}

// TestHealthProbe: starwire health answers SERVING for a running task on
// both its ports, and fails in one line where nothing answers.
func TestHealthProbe(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	grpc1, grpc2 := freePort(t), freePort(t)
	star1 := freePort(t)
	emap := filepath.Join(t.TempDir(), "endpoint_map")
	if err := os.WriteFile(emap, []byte(grpc1+"="+star1+"\n"+grpc2+"="+freePort(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startBinary(t, nil, "serve", "--job", "ps", "--cluster", "ps="+grpc1+";worker="+grpc2, "--endpoint_map", emap)
	p.waitLine(t, regexp.MustCompile(`serving:`), 20*time.Second)
	for _, args := range [][]string{
		{"health", "--addr", grpc1},
		{"health", "--addr", grpc1, "--service", "tensorflow.WorkerService"},
		{"health", "--starwire", "--addr", star1},
	} {
		if code, out, errOut := runBinary(t, nil, args...); code != 0 || out != "SERVING\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if code, _, errOut := runBinary(t, nil, "health", "--addr", grpc1, "--service", "no.such.Service"); code != 1 || !strings.Contains(errOut, "NotFound") {
		t.Errorf("unknown service: exit %d, stderr %q", code, errOut)
	}
	// Each port probed in the other's protocol: the error says which flag
	// probes it.
	if code, _, errOut := runBinary(t, nil, "health", "--addr", star1); code != 1 || !strings.Contains(errOut, "probe it with --starwire") {
		t.Errorf("health at the starwire port: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runBinary(t, nil, "health", "--starwire", "--addr", grpc1); code != 1 || !strings.Contains(errOut, "probe it without --starwire") {
		t.Errorf("health --starwire at the gRPC port: exit %d, stderr %q", code, errOut)
	}
	p.stop(t, syscall.SIGTERM)
	for _, args := range [][]string{{"health", "--addr", grpc1}, {"health", "--starwire", "--addr", star1}} {
		code, _, errOut := runBinary(t, nil, args...)
		if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "starwire: health: ") {
			t.Errorf("%v with the task gone: exit %d, stderr %q", args, code, errOut)
		}
	}
}
