package train_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
	"github.com/starwire/starwire/train"
)

// TestRecoverPSOfPublicTasks trains the example's model on public task
// servers, stops the parameter server in the middle of the run and starts
// it again at its addresses, a new incarnation with nothing of its state:
// the session finds it through a PeerRejoiner, builds and initializes the
// model again (no checkpoint: from step 0), trains the undone steps again
// and ends at exactly the global step asked for.
func TestRecoverPSOfPublicTasks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	j := startPublicJob(t, ctx)
	stopped := make(chan struct{})
	var once sync.Once
	j.s.AfterStep(func(ctx context.Context, _ int64) error {
		if done, _ := j.s.Steps(); done == 20 {
			once.Do(func() {
				go func() {
					j.local.Servers[0].Close()
					close(stopped)
				}()
			})
			// No step more until the ps is gone: steps take
			// milliseconds, and a run left to go on could end all its
			// steps before the close took hold.
			select {
			case <-stopped:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	ran := make(chan error, 1)
	go func() { ran <- j.s.Run(ctx) }()
	// Started again once the session waits for it, as a process restarted
	// after its loss was seen.
	<-stopped
	var early error
	ended := false
	testwait.Eventually(t, 20*time.Second, func() bool {
		select {
		case early = <-ran: // a run that ended never waits: say how
			ended = true
			return true
		default:
		}
		task, _ := j.s.Waiting()
		return task != ""
	}, "the session to wait for the stopped ps")
	if ended {
		done, lost := j.s.Steps()
		t.Fatalf("the run ended before it waited for the stopped ps (%d steps, %d lost): %v", done, lost, early)
	}
	if err := restartPS(j.local, j.logger); err != nil {
		t.Fatalf("restart the ps: %v", err)
	}
	j.check(t, <-ran)
}

// TestRecoverPSRestartedAtOnce: a parameter server stopped and started
// again at once, at its addresses, may answer the driver's probe, a new
// incarnation, before the step it broke has failed with the broken
// connection's Unavailable; the session takes the new incarnation for the
// restart it is and recovers, as from a ps found lost.
func TestRecoverPSRestartedAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	j := startPublicJob(t, ctx)
	restarted := make(chan error, 1)
	var once sync.Once
	j.s.AfterStep(func(context.Context, int64) error {
		if done, _ := j.s.Steps(); done == 20 {
			once.Do(func() {
				go func() {
					j.local.Servers[0].Close()
					restarted <- restartPS(j.local, j.logger)
				}()
			})
		}
		return nil
	})
	err := j.s.Run(ctx)
	if rerr := <-restarted; rerr != nil {
		t.Fatalf("restart the ps: %v", rerr)
	}
	j.check(t, err)
}

// publicJob is a session of the example's model on public task servers
// of one ps and one worker, set up to recover its ps.
type publicJob struct {
	s      *train.Session
	local  *tasks.Local
	logger *slog.Logger

	mu   sync.Mutex
	logs []string
}

const publicSteps = 60

func startPublicJob(t *testing.T, ctx context.Context) *publicJob {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	local, err := tasks.StartLocal(tasks.LocalOptions{PS: 1, Workers: 1, Protocol: cluster.ProtocolGRPCSeastar, Dir: t.TempDir(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	layout := local.Layout
	layout.FailFast = true
	peers := tasks.NewPeers(layout)
	t.Cleanup(peers.Close)
	var callers []driver.Caller
	for _, task := range []string{cluster.TaskName("ps", 0), cluster.TaskName("worker", 0)} {
		c, err := peers.Caller(task)
		if err != nil {
			t.Fatal(err)
		}
		callers = append(callers, c)
	}
	d := driver.New("recover-public", callers...)
	d.Watch(2 * time.Second)
	m := &numberModel{target: 3, rate: 0.05}
	s := train.NewSession(d, m, train.Options{PS: 1, Workers: 1, Steps: publicSteps})
	s.StopAtStep(publicSteps)
	j := &publicJob{s: s, local: local, logger: logger}
	s.RecoverTasks(train.RecoverOptions{
		Rejoin:  &train.PeerRejoiner{Peers: peers, Driver: d, Jobs: []string{"ps", "worker"}},
		Timeout: 20 * time.Second,
		Every:   20 * time.Millisecond,
		Log: func(msg string) {
			j.mu.Lock()
			j.logs = append(j.logs, msg)
			j.mu.Unlock()
		},
	})
	if err := s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return j
}

// check checks the end of a run that recovered from the restart of its
// ps after step 20: err, the run's, is nil, the run ended at exactly the
// steps asked for, trained again those the restart undid, and learned.
func (j *publicJob) check(t *testing.T, err error) {
	t.Helper()
	s := j.s
	j.mu.Lock()
	log := strings.Join(j.logs, "\n")
	j.mu.Unlock()
	if err != nil {
		t.Fatalf("run: %v\nrecovery: %s", err, log)
	}
	done, lost := s.Steps()
	if s.GlobalStep() != publicSteps || s.UndoneSteps() < 20 || done != publicSteps+s.UndoneSteps() || !strings.Contains(log, "no checkpoint to restore") {
		t.Fatalf("global step %d, steps %d, lost %d, undone %d: want the run to end at %d, the steps before the restart (20 or more) undone and trained again\nrecovery: %s",
			s.GlobalStep(), done, lost, s.UndoneSteps(), publicSteps, log)
	}
	// From w = 0 again, 60 steps bring the loss to 9 * 0.81^60, 3e-5.
	if losses := s.Losses(0); losses[len(losses)-1] > 1e-4 {
		t.Errorf("last loss %.6f: the model did not learn again after the restart", losses[len(losses)-1])
	}
}

// restartPS starts ps 0 of local again at its addresses.
func restartPS(local *tasks.Local, logger *slog.Logger) error {
	old := local.Servers[0]
	s, err := tasks.Listen("ps", 0, old.GRPCAddr, old.StarAddr, true, nil)
	if err != nil {
		return err
	}
	local.Servers[0] = s
	return s.Start(local.Layout, logger)
}
