package main

import (
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startRegistryCluster starts a ps and two workers as serve processes
// meeting in a registry directory, which it returns with them.
func startRegistryCluster(t *testing.T) (string, map[string]*process) {
	t.Helper()
	dir := t.TempDir()
	servers := map[string]*process{}
	for _, task := range []string{"ps:0", "worker:0", "worker:1"} {
		job, idx, _ := strings.Cut(task, ":")
		servers[task] = startBinary(t, nil, "serve", "--job", job, "--task", idx,
			"--ps", "1", "--workers", "2", "--registry_dir", dir, "--report", "0")
	}
	return dir, servers
}

// exited waits up to timeout for p to end and returns its exit status and
// when it ended.
func (p *process) exited(t *testing.T, timeout time.Duration) (int, time.Time) {
	t.Helper()
	done := make(chan time.Time, 1)
	go func() {
		for range p.lines {
		}
		p.cmd.Wait()
		done <- time.Now()
	}()
	select {
	case at := <-done:
		return p.cmd.ProcessState.ExitCode(), at
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-done
		t.Fatalf("still running %v on:\n%s\nstderr:\n%s", timeout, p.out.String(), p.stderr.String())
		return 0, time.Time{}
	}
}

var progressRE = regexp.MustCompile(`^step [1-9]\d*/\d+ `)

// TestTrainTaskKilled kills (or stops) a task of a running train's
// cluster: with --on_failure fail train exits non-zero, naming the task,
// within 10s of the kill; with recover (the default) a lost worker loses
// only its steps in flight and the run ends as an unbroken one does: its
// held-out loss no worse than the unbroken run's (unbrokenLoss, which
// TestTrainPSRestarted shares) by more than 5% of what that run learnt,
// one-sided and relative for the reasons TestTrainPSRestarted gives.
func TestTrainTaskKilled(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	train := func(dir string, steps int, extra ...string) *process {
		return startBinary(t, nil, append([]string{"train", "--registry_dir", dir, "--steps", strconv.Itoa(steps),
			"--vocab", "2000", "--held_out", "1024", "--seed", "5", "--progress", "100ms", "--connect_timeout", "20s"}, extra...)...)
	}
	for _, tc := range []struct {
		victim string
		sig    syscall.Signal
		task   string
	}{
		{"ps:0", syscall.SIGKILL, "/job:ps/replica:0/task:0"},
		{"worker:1", syscall.SIGKILL, "/job:worker/replica:0/task:1"},
		// Stopped, the task keeps its connections open and answers
		// nothing: only the probes find it.
		{"ps:0", syscall.SIGSTOP, "/job:ps/replica:0/task:0"},
	} {
		t.Run("fail/"+map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGSTOP: "SIGSTOP"}[tc.sig]+"/"+tc.victim, func(t *testing.T) {
			t.Parallel() // a cluster of its own
			dir, servers := startRegistryCluster(t)
			p := train(dir, 1_000_000, "--on_failure", "fail", "--task_timeout", "2s")
			p.waitLine(t, progressRE, 60*time.Second)
			killed := time.Now()
			servers[tc.victim].cmd.Process.Signal(tc.sig)
			code, at := p.exited(t, 30*time.Second)
			if code == 0 {
				t.Fatalf("train exited 0 after %s was killed:\n%s", tc.victim, p.out.String())
			}
			took := at.Sub(killed)
			t.Logf("kill to exit: %v", took)
			if took > 10*time.Second {
				t.Errorf("train exited %v after the kill, want within 10s", took)
			}
			if msg := p.stderr.String(); !strings.Contains(msg, tc.task+" lost: ") {
				t.Errorf("the error does not name %s as lost:\n%s", tc.task, msg)
			}
		})
	}
	t.Run("recover/worker:1", func(t *testing.T) {
		t.Parallel() // a cluster of its own
		const steps = unbrokenSteps
		initial, want := unbrokenLoss(t)
		dir, servers := startRegistryCluster(t)
		p := train(dir, steps)
		p.waitLine(t, progressRE, 60*time.Second)
		servers["worker:1"].cmd.Process.Signal(syscall.SIGKILL)
		if code, _ := p.exited(t, 60*time.Second); code != 0 {
			t.Fatalf("train exited %d after a worker was killed, want 0:\n%s\nstderr:\n%s", code, p.out.String(), p.stderr.String())
		}
		out := p.out.String()
		m := regexp.MustCompile(`(?m)^  steps (\d+), `).FindStringSubmatch(out)
		lost := regexp.MustCompile(`(?m)^  steps lost in flight with a lost task: (\d+)$`).FindStringSubmatch(out)
		if m == nil || lost == nil {
			t.Fatalf("the summary does not say the steps done and lost (was the worker killed after training?):\n%s", out)
		}
		// --steps is the global step the run ends at: a step lost in
		// flight is taken again.
		if done, n := atoi(m[1]), atoi(lost[1]); done != 2*steps || n > 10 {
			t.Errorf("%d steps done and %d lost, want %d done and few lost", done, n, 2*steps)
		}
		_, got := heldOutLoss(t, out)
		bound := want + 0.05*(initial-want)
		t.Logf("held-out loss %.4f, unbroken %.4f (from %.4f), bound %.4f", got, want, initial, bound)
		if got > bound {
			t.Errorf("held-out loss %.4f, unbroken run's %.4f from %.4f: want at most %.4f (5%% of the drop worse)", got, want, initial, bound)
		}
	})
}
