package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/rpc/cluster"
)

// A restartCluster is a ps and two workers as serve processes that a test
// kills and starts again with the same flags: meeting in a registry
// directory (each task on new ports when it restarts) or at fixed
// addresses (the same ones).
type restartCluster struct {
	serve map[string][]string // the flags of each task, "ps:0"
	procs map[string]*process
	join  []string // train's flags to join it
}

// startRestartCluster starts the cluster, its tasks' checkpoints under
// ckpt; fixed chooses fixed addresses over a registry.
func startRestartCluster(t *testing.T, ckpt string, fixed bool) *restartCluster {
	t.Helper()
	c := &restartCluster{serve: map[string][]string{}, procs: map[string]*process{}}
	names := []string{"ps:0", "worker:0", "worker:1"}
	common := []string{"--ps", "1", "--workers", "2", "--report", "0", "--checkpoint_dir", ckpt}
	if fixed {
		var grpc, emap []string
		for range names {
			g, err1 := cluster.FreePort("tcp", "127.0.0.1")
			s, err2 := cluster.FreePort("tcp", "127.0.0.1")
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			grpc, emap = append(grpc, g), append(emap, g+"="+s)
		}
		path := filepath.Join(t.TempDir(), "endpoint_map")
		if err := os.WriteFile(path, []byte(strings.Join(emap, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		spec := "ps=" + grpc[0] + ";worker=" + grpc[1] + "," + grpc[2]
		common = []string{"--report", "0", "--checkpoint_dir", ckpt, "--cluster", spec, "--endpoint_map", path}
		c.join = []string{"--cluster", spec, "--endpoint_map", path}
	} else {
		dir := t.TempDir()
		common = append(common, "--registry_dir", dir)
		c.join = []string{"--registry_dir", dir}
	}
	for _, name := range names {
		job, idx, _ := strings.Cut(name, ":")
		c.serve[name] = append([]string{"serve", "--job", job, "--task", idx}, common...)
		c.start(t, name)
	}
	return c
}

func (c *restartCluster) start(t *testing.T, name string) {
	t.Helper()
	c.procs[name] = startBinary(t, nil, c.serve[name]...)
}

// kill kills task name with SIGKILL and waits for it to end.
func (c *restartCluster) kill(t *testing.T, name string) {
	t.Helper()
	c.procs[name].cmd.Process.Signal(syscall.SIGKILL)
	c.procs[name].exited(t, 10*time.Second)
}

// train starts a train of steps per worker on the cluster.
func (c *restartCluster) train(t *testing.T, steps int, extra ...string) *process {
	t.Helper()
	args := append([]string{"train", "--steps", strconv.Itoa(steps), "--vocab", "2000", "--held_out", "1024", "--seed", "5",
		"--progress", "100ms", "--connect_timeout", "20s"}, c.join...)
	return startBinary(t, nil, append(args, extra...)...)
}

var progressStepRE = regexp.MustCompile(`^step (\d+)/\d+ `)

// waitStep waits for a progress line at step n or beyond.
func (p *process) waitStep(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		line := p.waitLine(t, progressStepRE, time.Until(deadline))
		if atoi(progressStepRE.FindStringSubmatch(line)[1]) >= n {
			return
		}
	}
}

// TestTrainPSRestarted kills a parameter server of a running train with
// checkpoints and starts it again once train says it waits for it, at
// new addresses (a registry) and at the same ones: train restores every
// ps from a checkpoint (it undoes fewer global steps than were made
// before the kill: a ps back with its initial values undoes them all),
// goes on, exits 0, and its held-out loss is no worse than an unbroken
// run's of the same steps by more than 5% of what that run learnt (its
// drop from the initial loss, 0.31: a bound of about 0.016).
//
// The bounds are one-sided and relative, not a fixed 0.01 either way:
// two asynchronous workers interleave differently on every run, more so
// beside other tests, so that unbroken runs of the same steps ended
// 0.004 apart and a broken one 0.007 worse than its unbroken run; and
// a save takes long beside other tests, the workers training on, so that
// the newest checkpoint was up to 961 global steps old at a kill at
// about 1,500, not the interval's 250.
func TestTrainPSRestarted(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	const steps, every = unbrokenSteps, 250
	initial, want := unbrokenLoss(t)
	for _, tc := range []struct {
		name  string
		fixed bool
	}{{"new address", false}, {"same address", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a cluster of its own
			ckpt := t.TempDir()
			c := startRestartCluster(t, ckpt, tc.fixed)
			p := c.train(t, steps, "--checkpoint_dir", filepath.Join(ckpt, "broken"),
				"--save_checkpoint_steps", strconv.Itoa(every), "--save_checkpoint_secs", "0", "--task_timeout", "2s")
			p.waitStep(t, 1500, 60*time.Second)
			// A save takes long on a loaded machine: the first one was still
			// being written at step 1,509 once, and the ps then came back
			// with nothing to restore. What is checked is the restore.
			testwait.Eventually(t, 60*time.Second, func() bool {
				_, err := checkpoint.Latest(filepath.Join(ckpt, "broken"))
				return err == nil
			}, "a checkpoint to be saved before ps:0 is killed")
			c.kill(t, "ps:0")
			killed := time.Now()
			waiting := regexp.MustCompile(`^step (\d+)/\d+ \(.*\)  waiting for /job:ps/replica:0/task:0, \d+\.\d s$`)
			killedAt := atoi(waiting.FindStringSubmatch(p.waitLine(t, waiting, 20*time.Second))[1])
			c.start(t, "ps:0")
			restarted := time.Now()
			p.waitLine(t, regexp.MustCompile(`^recovery: restored every ps from model\.ckpt-\d+ `), 30*time.Second)
			t.Logf("kill to waiting line %v; restart to restored %v", restarted.Sub(killed), time.Since(restarted))
			if code, _ := p.exited(t, 60*time.Second); code != 0 {
				t.Fatalf("train exited %d after ps:0 restarted, want 0:\n%s\nstderr:\n%s", code, p.out.String(), p.stderr.String())
			}
			out := p.out.String()
			// --steps is the global step the run ends at, the steps the
			// restore undid trained again.
			if end := fmt.Sprintf("(global step %d)", 2*steps); !strings.Contains(out, "redone: ") || !strings.Contains(out, end) {
				t.Errorf("the run did not end at global step %d, saying what it redid:\n%s", 2*steps, out)
			}
			m := regexp.MustCompile(`(?m)^  global steps undone by recovery: (\d+)$`).FindStringSubmatch(out)
			if m == nil {
				t.Errorf("the summary does not count the steps the restore undid:\n%s", out)
			} else if undone := atoi(m[1]); undone >= killedAt {
				t.Errorf("the restore undid %d global steps of the %d made before the kill: not from a checkpoint\n%s", undone, killedAt, out)
			}
			_, got := heldOutLoss(t, out)
			bound := want + 0.05*(initial-want)
			t.Logf("held-out loss %.4f, unbroken %.4f (from %.4f), bound %.4f; undone %v", got, want, initial, bound, m)
			if got > bound {
				t.Errorf("held-out loss %.4f, unbroken run's %.4f from %.4f: want at most %.4f (5%% of the drop worse)\n%s", got, want, initial, bound, out)
			}
		})
	}
}

// unbrokenSteps is the steps per worker of the unbroken run that
// TestTrainPSRestarted and TestTrainTaskKilled's recover case set their
// broken runs against.
const unbrokenSteps = 2000

// unbroken is that run's outcome, made once for the tests that want it.
var unbroken struct {
	once           sync.Once
	initial, final float64
	failed         bool
}

// unbrokenLoss returns the held-out losses, initial and final, of a train
// of unbrokenSteps on a cluster of its own, with checkpoints, as the
// broken runs make. One run is every case's baseline, not one per test:
// each cost a 2000-step train more, on a machine whose CPUs the suite's
// other tests want.
func unbrokenLoss(t *testing.T) (initial, final float64) {
	t.Helper()
	unbroken.once.Do(func() {
		unbroken.failed = true // until the run is done: t.Fatal ends Do too
		dir := t.TempDir()
		p := startRestartCluster(t, dir, false).train(t, unbrokenSteps, "--checkpoint_dir", filepath.Join(dir, "unbroken"))
		if code, _ := p.exited(t, 60*time.Second); code != 0 {
			t.Fatalf("unbroken run: exit %d:\n%s", code, p.stderr.String())
		}
		unbroken.initial, unbroken.final = heldOutLoss(t, p.out.String())
		unbroken.failed = false
	})
	if unbroken.failed {
		t.Fatal("the unbroken run failed, in the test that made it")
	}
	return unbroken.initial, unbroken.final
}

// TestTrainWorkerRestarted: a worker killed and started again rejoins
// (its sessions and graphs made again) and the run exits 0. The kill
// comes at global step 600 of 4,000, so that the rejoin (a process start
// and a probe) finds most of the run still to make, even on a loaded
// machine that slows the restart more than the steps.
func TestTrainWorkerRestarted(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	c := startRestartCluster(t, t.TempDir(), false)
	p := c.train(t, 2000)
	p.waitStep(t, 600, 60*time.Second)
	c.kill(t, "worker:1")
	p.waitLine(t, regexp.MustCompile(`^recovery: /job:worker/replica:0/task:1 lost: `), 30*time.Second)
	c.start(t, "worker:1")
	p.waitLine(t, regexp.MustCompile(`^recovery: /job:worker/replica:0/task:1 answers again: it rejoins$`), 30*time.Second)
	if code, _ := p.exited(t, 60*time.Second); code != 0 {
		t.Fatalf("train exited %d after worker:1 restarted, want 0:\n%s\nstderr:\n%s", code, p.out.String(), p.stderr.String())
	}
}

// TestTrainWorkerJoinsLate: under --on_failure recover a worker missing
// at the start does not fail the run after --connect_timeout: train starts
// with the other, and the missing worker, started once train is
// training, joins and the run exits 0.
func TestTrainWorkerJoinsLate(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	c := startRestartCluster(t, t.TempDir(), true)
	c.kill(t, "worker:1")
	p := c.train(t, 2000, "--connect_timeout", "3s")
	p.waitLine(t, regexp.MustCompile(`^recovery: /job:worker/replica:0/task:1 does not answer yet: `), 30*time.Second)
	p.waitStep(t, 1, 60*time.Second)
	c.start(t, "worker:1")
	p.waitLine(t, regexp.MustCompile(`^recovery: /job:worker/replica:0/task:1 answers again: it rejoins$`), 30*time.Second)
	if code, _ := p.exited(t, 60*time.Second); code != 0 {
		t.Fatalf("train exited %d after worker:1 joined late, want 0:\n%s\nstderr:\n%s", code, p.out.String(), p.stderr.String())
	}
}

// TestTrainPSNeverBack: a ps that does not come back fails the run after
// --recovery_timeout, naming the task and the address tried.
func TestTrainPSNeverBack(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	c := startRestartCluster(t, t.TempDir(), true)
	p := c.train(t, 1_000_000, "--recovery_timeout", "1s", "--task_timeout", "2s")
	p.waitStep(t, 1, 60*time.Second)
	addr := regexp.MustCompile(`ps=([^;]+);`).FindStringSubmatch(strings.Join(c.join, " "))[1]
	c.kill(t, "ps:0")
	killed := time.Now()
	code, at := p.exited(t, 30*time.Second)
	if code == 0 {
		t.Fatalf("train exited 0 with ps:0 gone:\n%s", p.out.String())
	}
	t.Logf("kill to exit: %v", at.Sub(killed))
	msg := p.stderr.String()
	if !strings.Contains(msg, "/job:ps/replica:0/task:0 lost and not back after ") || !strings.Contains(msg, "(tried "+addr+")") {
		t.Errorf("the error does not name the ps and the address tried (%s):\n%s", addr, msg)
	}
}

// TestProgressWaiting: while the job waits for a lost task, progress
// says so instead of a rate of 0 and a NaN loss.
func TestProgressWaiting(t *testing.T) {
	p := trainProgress{Steps: 1418, TotalSteps: 4000, Loss: math.NaN(), Waiting: "/job:ps/replica:0/task:0", WaitingFor: 3240 * time.Millisecond}
	if got, want := progressLine(p), "step 1418/4000 (35.5%)  waiting for /job:ps/replica:0/task:0, 3.2 s"; got != want {
		t.Errorf("progress line %q, want %q", got, want)
	}
	bar := progressBar(p, 100)
	if !strings.Contains(bar, "waiting for /job:ps/replica:0/task:0, 3.2 s") || strings.Contains(bar, "NaN") || len([]rune(bar)) != 100 {
		t.Errorf("progress bar %q: want the wait, no NaN, 100 columns", bar)
	}
}
