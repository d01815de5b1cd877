package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/internal/vethnet"
	"github.com/vishvananda/netlink"
)

// clusterName gives each test's cluster a name no other test binary uses.
func clusterName(t *testing.T, suffix string) string {
	return "t" + strconv.Itoa(os.Getpid()) + suffix
}

// rootLinks lists the links of this namespace, to check a cluster leaves
// none behind.
func rootLinks(t *testing.T) []string {
	t.Helper()
	ls, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range ls {
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	return names
}

// checkGone fails t if anything of cluster name is left: namespaces, its
// state directory, links in this namespace beyond those there before.
func checkGone(t *testing.T, stateDir, name string, linksBefore []string) {
	t.Helper()
	if ns, err := vethnet.SegmentNamespaces(name); err != nil || len(ns) > 0 {
		t.Errorf("namespaces left behind: %v %v", ns, err)
		vethnet.DeleteSegment(name)
	}
	if _, err := os.Stat(filepath.Join(stateDir, name)); !os.IsNotExist(err) {
		t.Errorf("state directory left behind: %v", err)
	}
	for _, l := range rootLinks(t) {
		if !slices.Contains(linksBefore, l) && strings.HasPrefix(l, "sw") {
			t.Errorf("link %s left behind", l)
		}
	}
}

// TestClusterRun trains across a ps and two workers, each in a namespace
// of its own on a bridge, and a chief driving them from a fourth: over
// AF_XDP (each call of a worker to the ps whole over AF_XDP or TCP, as
// the auto policy picks), then over TCP; and
// leaves nothing behind.
func TestClusterRun(t *testing.T) {
	netnstest.Require(t)
	bin := buildBinary(t)
	stateDir, name := t.TempDir(), clusterName(t, "r")
	links := rootLinks(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "cluster", "run", "--name", name, "--state_dir", stateDir, "--ps", "1", "--workers", "2",
		"--", "--steps", "40", "--vocab", "5000", "--held_out", "512")
	out, err := cmd.CombinedOutput()
	defer checkGone(t, stateDir, name, links)
	if err != nil {
		t.Fatalf("cluster run: %v\n%s", err, out)
	}
	sections := strings.Split(string(out), "\ntasks' calls to each other over ")
	if len(sections) != 3 || !strings.HasPrefix(sections[1], "AF_XDP") || !strings.HasPrefix(sections[2], "TCP") {
		t.Fatalf("want an AF_XDP section, then a TCP one:\n%s", out)
	}
	for i, over := range []string{`AF_XDP on eth0 \(UDP port 2223\) or TCP, per call \(auto\)`, `TCP`} {
		sec := sections[i+1]
		initial, final := heldOutLoss(t, sec)
		if final >= initial {
			t.Errorf("section %d: held-out loss %.4f -> %.4f", i, initial, final)
		}
		for w := range 2 {
			re := regexp.MustCompile(`(?m)^  /job:worker/replica:0/task:` + strconv.Itoa(w) + ` +worker\d +198\.18\.0\.\d+ +([1-9]\d*) +[0-9.]+  ` + over + ` +(\d+)/(\d+), `)
			m := re.FindStringSubmatch(sec)
			if m == nil {
				t.Errorf("no line for worker %d's calls over %s:\n%s", w, over, sec)
				continue
			}
			// The link carried the calls: the worker's pulls need packets
			// both ways, at least one per call.
			if calls, rx, _ := atoi(m[1]), atoi(m[2]), atoi(m[3]); rx < calls {
				t.Errorf("worker %d: %d calls but %d packets received on its link", w, calls, rx)
			}
			if i > 0 {
				continue
			}
			// Over AF_XDP each call took one path or the other, whole.
			paths := regexp.MustCompile(`(?m)^  /job:worker/replica:0/task:` + strconv.Itoa(w) + ` per call \(auto\): AF_XDP (\d+) calls, [0-9.]+ MB; TCP (\d+) calls, `).FindStringSubmatch(sec)
			if paths == nil {
				t.Errorf("no line for worker %d's calls per path:\n%s", w, sec)
			} else if calls, xdp, tcp := atoi(m[1]), atoi(paths[1]), atoi(paths[2]); xdp+tcp != calls {
				t.Errorf("worker %d: %d calls, of which %d over AF_XDP and %d over TCP", w, calls, xdp, tcp)
			}
		}
	}
	if !regexp.MustCompile(`(?m)^removed cluster ` + name + `: namespaces (swc-` + name + `-\w+ ?){5}, `).Match(out) {
		t.Errorf("no line saying the cluster's 5 namespaces were removed:\n%s", out)
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// TestClusterRunInterrupted stops a run with SIGINT while it trains: it
// exits with 130 and removes everything, its tasks included.
func TestClusterRunInterrupted(t *testing.T) {
	netnstest.Require(t)
	bin := buildBinary(t)
	stateDir, name := t.TempDir(), clusterName(t, "i")
	links := rootLinks(t)
	cmd := exec.Command(bin, "cluster", "run", "--name", name, "--state_dir", stateDir, "--ps", "1", "--workers", "1",
		"--paths", "tcp", "--", "--steps", "1000000", "--vocab", "5000", "--held_out", "512")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, stateDir, name, links)
	pids := waitTraining(t, stateDir, name, cmd)
	cmd.Process.Signal(syscall.SIGINT)
	code := waitExit(t, cmd, 30*time.Second)
	if code != 130 {
		t.Errorf("exit %d after SIGINT, want 130:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "removed cluster "+name) {
		t.Errorf("no line saying the cluster was removed:\n%s", out.String())
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("task process %d outlived the run", pid)
		}
	}
}

// TestClusterRunKilled kills a run with SIGKILL: its tasks die with it,
// and the next cluster command removes what it left.
func TestClusterRunKilled(t *testing.T) {
	netnstest.Require(t)
	bin := buildBinary(t)
	stateDir, name := t.TempDir(), clusterName(t, "k")
	links := rootLinks(t)
	cmd := exec.Command(bin, "cluster", "run", "--name", name, "--state_dir", stateDir, "--ps", "1", "--workers", "1",
		"--paths", "tcp", "--", "--steps", "1000000", "--vocab", "5000", "--held_out", "512")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer checkGone(t, stateDir, name, links)
	pids := waitTraining(t, stateDir, name, cmd)
	cmd.Process.Kill()
	cmd.Wait()
	for _, pid := range pids {
		waitGone(t, pid, 10*time.Second)
	}
	if ns, _ := vethnet.SegmentNamespaces(name); len(ns) == 0 {
		t.Fatal("a killed run left no namespaces: nothing tests the sweep")
	}
	// The next cluster command sweeps: down, which then finds nothing
	// left of the cluster to remove.
	out, _ := exec.Command(bin, "cluster", "down", "--name", name, "--state_dir", stateDir).CombinedOutput()
	if !strings.Contains(string(out), "removed cluster "+name+", abandoned by process "+strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("the sweep said %q", out)
	}
}

// TestClusterUpDown leaves a cluster up, trains on it from its chief's
// namespace as the printed command line does, and takes it down.
func TestClusterUpDown(t *testing.T) {
	netnstest.Require(t)
	bin := buildBinary(t)
	stateDir, name := t.TempDir(), clusterName(t, "u")
	links := rootLinks(t)
	defer checkGone(t, stateDir, name, links)
	up := exec.Command(bin, "cluster", "up", "--name", name, "--state_dir", stateDir, "--ps", "1", "--workers", "1")
	out, err := up.CombinedOutput()
	if err != nil {
		exec.Command(bin, "cluster", "down", "--name", name, "--state_dir", stateDir).Run()
		t.Fatalf("cluster up: %v\n%s", err, out)
	}
	var pids []int
	for _, h := range []string{"ps0", "worker0"} {
		p, err := netns.Pids(vethnet.NSName(name, h))
		if err != nil || len(p) != 1 {
			t.Errorf("%s runs %v (%v), want one task", h, p, err)
		}
		pids = append(pids, p...)
	}
	// Up again under the same name is refused.
	if again, err := exec.Command(bin, "cluster", "up", "--name", name, "--state_dir", stateDir).CombinedOutput(); err == nil || !strings.Contains(string(again), "exists") {
		t.Errorf("a second up: %v: %s", err, again)
	}
	chiefDir := filepath.Join(stateDir, name, "chief")
	tf, err := os.ReadFile(filepath.Join(chiefDir, "tf_config"))
	if err != nil {
		t.Fatal(err)
	}
	train := exec.Command(bin, "train", "--steps", "20", "--vocab", "5000", "--held_out", "256", "--connect_timeout", "20s")
	train.Dir, train.Env = chiefDir, append(os.Environ(), "TF_CONFIG="+strings.TrimSpace(string(tf)))
	var trainOut bytes.Buffer
	train.Stdout, train.Stderr = &trainOut, &trainOut
	h, err := netns.OpenNamed(vethnet.NSName(name, "chief"))
	if err != nil {
		t.Fatal(err)
	}
	err = netns.Do(h, train.Start)
	h.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := train.Wait(); err != nil {
		t.Errorf("train on the cluster: %v\n%s", err, trainOut.String())
	} else if !regexp.MustCompile(`tasks' calls to each other: AF_XDP on eth0 \(UDP port 2223\) or TCP, per call \(auto\) \(.*worker:0`).Match(trainOut.Bytes()) ||
		!regexp.MustCompile(`  tasks' calls to each other: (.*\); )?AF_XDP \(\w+:\d [1-9]`).Match(trainOut.Bytes()) {
		t.Errorf("the worker's calls did not go over AF_XDP:\n%s", trainOut.String())
	}
	down, err := exec.Command(bin, "cluster", "down", "--name", name, "--state_dir", stateDir).CombinedOutput()
	if err != nil || !strings.Contains(string(down), "cluster "+name+" removed") {
		t.Errorf("cluster down: %v: %s", err, down)
	}
	for _, pid := range pids {
		waitGone(t, pid, 5*time.Second)
	}
	if again, err := exec.Command(bin, "cluster", "down", "--name", name, "--state_dir", stateDir).CombinedOutput(); err == nil {
		t.Errorf("down of a cluster already down succeeded: %s", again)
	}
}

// waitTraining waits until the run's chief is training: its tasks serve
// and train has started. It returns the tasks' pids.
func waitTraining(t *testing.T, stateDir, name string, cmd *exec.Cmd) []int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if cmd.ProcessState != nil {
			t.Fatal("the run ended before training")
		}
		chief, _ := netns.Pids(vethnet.NSName(name, "chief"))
		var tasks []int
		for _, h := range []string{"ps0", "worker0"} {
			p, _ := netns.Pids(vethnet.NSName(name, h))
			tasks = append(tasks, p...)
		}
		if len(chief) > 0 && len(tasks) == 2 && trainStarted(filepath.Join(stateDir, name, "worker0", "serve-tcp.log")) {
			return tasks
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not start training in 60s")
		}
		time.Sleep(20 * time.Millisecond) // paces the polls of the run's process table and log
	}
}

// trainStarted reports whether the worker's log says it serves.
func trainStarted(log string) bool {
	f, err := os.Open(log)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		if strings.Contains(sc.Text(), " serving: ") {
			return true
		}
	}
	return false
}

// waitExit waits for cmd to exit and returns its status, killing it after
// timeout.
func waitExit(t *testing.T, cmd *exec.Cmd, timeout time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		t.Errorf("still running %v after the signal", timeout)
	}
	return cmd.ProcessState.ExitCode()
}

// waitGone waits for process pid to end.
func waitGone(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Errorf("process %d still running after %v", pid, timeout)
			return
		}
		time.Sleep(10 * time.Millisecond) // paces the polls of a process nothing here waits on
	}
}

// alive reports whether process pid runs: a zombie, which an init that
// does not reap leaves behind, has ended.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := bytes.Cut(stat, []byte(") "))
	return len(rest) > 0 && rest[0] != 'Z'
}
