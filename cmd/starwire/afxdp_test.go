package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/capture"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"golang.org/x/sys/unix"
)

// TestPeersOverAFXDP runs a ps and a worker in two network namespaces
// joined by a veth pair, each serving with --afxdp_iface on its veth end
// and every call to peers over AF_XDP (--afxdp_path bypass; by default each
// takes the path measured faster for its size, on veth mostly TCP), and
// trains against them from the worker's namespace: the worker pulls every
// step's rows from the ps with RecvTensor over AF_XDP, while the driver's
// calls go over TCP.
func TestPeersOverAFXDP(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	p := netnstest.NewForTest(t, netns.Options{Queues: 1})
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	// start runs bin inside e's namespace: a child process inherits the
	// namespace of the thread that forks it.
	start := func(e *netns.End, out *bytes.Buffer, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = out, out
		if err := e.Do(cmd.Start); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	var psOut, wOut, trainOut bytes.Buffer
	capturePath := filepath.Join(t.TempDir(), "ps.pcap")
	servers := []struct {
		cmd *exec.Cmd
		out *bytes.Buffer
	}{
		{start(p.A, &psOut, "serve", "--job", "ps", "--ps", "1", "--workers", "1", "--registry_dir", dir,
			"--host", p.A.Addr.String(), "--afxdp_iface", p.A.Link, "--afxdp_path", "bypass", "--pcap", capturePath), &psOut},
		{start(p.B, &wOut, "serve", "--job", "worker", "--ps", "1", "--workers", "1", "--registry_dir", dir,
			"--host", p.B.Addr.String(), "--afxdp_iface", p.B.Link, "--afxdp_path", "bypass"), &wOut},
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.cmd.Process.Kill()
			s.cmd.Wait()
		}
	})
	train := start(p.B, &trainOut, "train", "--registry_dir", dir, "--ps", "1", "--workers", "1",
		"--steps", "60", "--vocab", "5000", "--held_out", "512", "--connect_timeout", "20s")
	if err := train.Wait(); err != nil {
		t.Fatalf("train: %v\n%s\nps:\n%s\nworker:\n%s", err, trainOut.String(), psOut.String(), wOut.String())
	}
	initial, final := heldOutLoss(t, trainOut.String())
	if final >= initial {
		t.Errorf("held-out loss %.4f -> %.4f", initial, final)
	}
	// The driver's summary says what the tasks' calls went over, which
	// only the tasks know.
	if !regexp.MustCompile(`(?m)^tasks' calls to each other: .*AF_XDP on `+p.B.Link+` \(UDP port \d+\) or TCP, per call \(afxdp\) \(.*worker:0`).MatchString(trainOut.String()) ||
		!regexp.MustCompile(`(?m)^  tasks' calls to each other: (.*\); )?AF_XDP \([^)]*worker:0 [1-9]\d* calls`).MatchString(trainOut.String()) {
		t.Errorf("the summary does not say the worker's calls went over AF_XDP:\n%s", trainOut.String())
	}
	// Stop the servers and read what their peer calls went over.
	for _, s := range servers {
		s.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, s := range servers {
		done := make(chan struct{})
		go func() { s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("a server did not stop on SIGTERM:\n%s", s.out.String())
		}
	}
	m := regexp.MustCompile(`stopping: \d+ calls to peers .* over AF_XDP on .*\n  to \S+ per call \(afxdp\): AF_XDP (\d+) calls`).FindStringSubmatch(wOut.String())
	if m == nil {
		t.Fatalf("the worker's peer calls did not go over AF_XDP:\n%s", wOut.String())
	}
	// Every training step and held-out batch pulls its rows once.
	t.Logf("worker:\n%s", wOut.String())
	if n, _ := strconv.Atoi(m[1]); n < 60 {
		t.Errorf("the worker made %d peer calls over AF_XDP, want at least 60", n)
	}
	// The ps captured its AF_XDP frames (serve --pcap), and they dissect.
	f, err := os.Open(capturePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := capture.Check(f); err != nil || n < 120 {
		t.Errorf("the ps's capture: %d frames, %v; want the worker's pulls, dissecting cleanly", n, err)
	}
}

// TestTrainLocalAFXDP trains on the in-process cluster with each task in
// its own namespace and the workers' RecvTensor calls over AF_XDP.
func TestTrainLocalAFXDP(t *testing.T) {
	netnstest.Require(t)
	code, out, errOut := runMain(t, "train", "--afxdp", "on", "--steps", "100", "--vocab", "5000", "--held_out", "1024")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	initial, final := heldOutLoss(t, out)
	if final >= initial {
		t.Errorf("held-out loss %.4f -> %.4f over AF_XDP", initial, final)
	}
	// The headline says what carried the calls, path by path, as the
	// transports counted them per call: under auto, TCP most of them, and
	// AF_XDP the calls that measure it.
	if !regexp.MustCompile(`(?m)^  tasks' calls to each other: .*worker:0 [1-9]\d* calls, [0-9.]+ MB; worker:1 [1-9]\d* calls`).MatchString(out) {
		t.Errorf("summary does not count the workers' calls per path:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^  tasks' calls to each other: (.*\); )?AF_XDP \(\w+:\d [1-9]\d* calls`).MatchString(out) {
		t.Errorf("summary does not report the calls AF_XDP carried:\n%s", out)
	}
	// Reactors that poll adaptively park when idle: no P of their own.
	if !regexp.MustCompile(`(?m)^runtime: GOMAXPROCS \d+ on \d+ CPUs \(one spare for the tasks' network goroutines;`).MatchString(out) {
		t.Errorf("header does not give the adaptive reactors' cluster just the one spare P:\n%s", out)
	}
}

// TestTrainLocalAFXDPPolling: with DeepRec's busy-polling knob, the
// cluster takes a P for each reactor the CPU plan lets spin; with one CPU
// none may spin, and it takes none.
func TestTrainLocalAFXDPPolling(t *testing.T) {
	netnstest.Require(t)
	t.Setenv("WORKER_ENABLE_POLLING", "true")
	t.Setenv("PS_ENABLE_POLLING", "true")
	// The host's record of spinning reactors (a lock file per CPU) lives
	// under TMPDIR: a private one keeps other processes' spinners, such as
	// other packages' tests running beside this one, out of the plan.
	t.Setenv("TMPDIR", t.TempDir())
	code, out, errOut := runMain(t, "train", "--afxdp", "on", "--steps", "50", "--vocab", "5000", "--held_out", "1024")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	want := `one spare for the tasks' network goroutines, [1-9]\d* for their spinning AF_XDP reactors;`
	if set.Count() < 2 {
		want = `one spare for the tasks' network goroutines;`
	}
	if !regexp.MustCompile(`(?m)^runtime: GOMAXPROCS \d+ on \d+ CPUs \(` + want).MatchString(out) {
		t.Errorf("header does not match %q on %d CPUs:\n%s", want, set.Count(), out)
	}
}
