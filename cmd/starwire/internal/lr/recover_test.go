package lr

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/tasks"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/wire/tfpb"
)

// restarter is a Rejoiner over an in-process cluster whose ps it stops
// and, when the job first looks for it, starts again at its addresses: a
// new incarnation with no sessions, graphs or variables.
type restarter struct {
	t      *testing.T
	local  *tasks.Local
	peers  *tasks.Peers
	d      *driver.Driver
	ckpt   string
	logger *slog.Logger

	mu        sync.Mutex
	stopped   bool
	restarted bool
}

// stop closes ps 0.
func (r *restarter) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.local.Servers[0].Close()
	r.stopped = true
}

func (r *restarter) Find(ctx context.Context, task string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.local.Servers[0]
	if task == old.Task() && r.stopped && !r.restarted {
		s, err := tasks.Listen("ps", 0, old.GRPCAddr, old.StarAddr, true, nil)
		if err != nil {
			return old.GRPCAddr, err
		}
		s.CheckpointDir = r.ckpt
		if err := s.Start(r.local.Layout, r.logger); err != nil {
			s.Close()
			return old.GRPCAddr, err
		}
		r.local.Servers[0], r.restarted = s, true
	}
	addrs, err := r.peers.Addrs(task)
	if err != nil {
		return "", err
	}
	if _, err := r.peers.Repoint(task, addrs); err != nil {
		return addrs.GRPC, err
	}
	c, err := r.peers.Caller(task)
	if err != nil {
		return addrs.GRPC, err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := c.GetStatus(sctx); err != nil {
		return addrs.GRPC, err
	}
	return addrs.GRPC, r.d.Replace(c)
}

func (r *restarter) ServerDef() *tfpb.ServerDef { return nil }

// TestRecoverRestartedPS stops the ps of an in-process cluster after a
// checkpoint, starts it again (same addresses, nothing of its state) when
// the job looks for it: the job restores it from the checkpoint, counts
// the steps undone and lost, and ends with the loss of a run that did not
// break.
func TestRecoverRestartedPS(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Steps, cfg.Vocab, cfg.HeldOut, cfg.Workers = 300, 2000, 1024, 2
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ckpt := t.TempDir()
	local, err := tasks.StartLocal(tasks.LocalOptions{PS: 1, Workers: 2, Protocol: cluster.ProtocolGRPCSeastar, Dir: t.TempDir(), Logger: logger, CheckpointDir: ckpt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	peers, callers := callersOf(t, local)
	d := driver.New("recover-test", callers...)
	d.Watch(2 * time.Second)
	job, err := New(cfg, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &restarter{t: t, local: local, peers: peers, d: d, ckpt: ckpt, logger: logger}
	var logs []string
	var logMu sync.Mutex
	job.RecoverTasks(RecoverOptions{
		Rejoin:  r,
		Timeout: 20 * time.Second,
		Every:   20 * time.Millisecond,
		Restore: func(ctx context.Context) (int64, error) {
			step, _, err := job.Restore(ctx, ckpt)
			return step, err
		},
		Log: func(msg string) {
			logMu.Lock()
			logs = append(logs, msg)
			logMu.Unlock()
		},
	})
	if err := job.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer job.Close(ctx)
	// Saved at global step 200, the ps is stopped at 300 of 600.
	var once, saved sync.Once
	job.AfterStep(func(ctx context.Context, step int64) error {
		if step >= 200 {
			var err error
			saved.Do(func() { _, err = job.Save(ctx, ckpt, step, 0) })
			if err != nil {
				return err
			}
		}
		if step >= 300 {
			once.Do(func() { go r.stop() })
		}
		return nil
	})
	sum, err := job.Run(ctx, nil)
	if err != nil {
		t.Fatalf("run: %v\nrecovery: %s", err, strings.Join(logs, "\n"))
	}
	logMu.Lock()
	log := strings.Join(logs, "\n")
	logMu.Unlock()
	t.Logf("steps %d, lost %d, undone %d, held-out %.4f -> %.4f\n%s", sum.Steps, sum.LostSteps, sum.UndoneSteps, sum.InitialLoss, sum.FinalLoss, log)
	r.mu.Lock()
	restarted := r.restarted
	r.mu.Unlock()
	if !restarted || !strings.Contains(log, "/job:ps/replica:0/task:0 answers again") {
		t.Fatalf("the ps was not restarted and found again:\n%s", log)
	}
	if sum.UndoneSteps <= 0 || sum.Steps+sum.LostSteps != int64(2*cfg.Steps) {
		t.Errorf("steps %d, lost %d, undone %d: want %d done or lost and some undone", sum.Steps, sum.LostSteps, sum.UndoneSteps, 2*cfg.Steps)
	}
	if got, want := job.GlobalStep(), sum.Steps-sum.UndoneSteps; got != want {
		t.Errorf("global step %d, want the steps done less those undone, %d", got, want)
	}
	if sum.FinalLoss > 0.9*sum.InitialLoss {
		t.Errorf("held-out loss %.4f -> %.4f: the restored model did not keep learning", sum.InitialLoss, sum.FinalLoss)
	}
}

// TestRecoverTimeout: a ps that never answers again fails the run after
// the timeout, naming it and the address tried.
func TestRecoverTimeout(t *testing.T) {
	job := &Job{cfg: Config{PS: 1, Workers: 1}, rec: &recovery{opts: RecoverOptions{Timeout: 50 * time.Millisecond, Every: 10 * time.Millisecond, Rejoin: never{}}}}
	job.d = driver.New("s")
	start := time.Now()
	err := job.await(context.Background(), "/job:ps/replica:0/task:0", start.Add(50*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "/job:ps/replica:0/task:0 lost and not back after ") || !strings.Contains(err.Error(), "(tried 127.0.0.1:1): refused") {
		t.Fatalf("await: %v, want the task, the address tried and the last error", err)
	}
	if !errors.Is(err, errRefused) {
		t.Errorf("await: %v does not wrap the last error", err)
	}
}

var errRefused = errors.New("refused")

type never struct{}

func (never) Find(context.Context, string) (string, error) { return "127.0.0.1:1", errRefused }
func (never) ServerDef() *tfpb.ServerDef                   { return nil }
