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
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	local, err := tasks.StartLocal(tasks.LocalOptions{PS: 1, Workers: 1, Protocol: cluster.ProtocolGRPCSeastar, Dir: t.TempDir(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	layout := local.Layout
	layout.FailFast = true
	peers := tasks.NewPeers(layout)
	defer peers.Close()
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
	const steps = 60
	m := &numberModel{target: 3, rate: 0.05}
	s := train.NewSession(d, m, train.Options{PS: 1, Workers: 1, Steps: steps})
	s.StopAtStep(steps)
	m.s = s
	var mu sync.Mutex
	var logs []string
	s.RecoverTasks(train.RecoverOptions{
		Rejoin:  &train.PeerRejoiner{Peers: peers, Driver: d, Jobs: []string{"ps", "worker"}},
		Timeout: 20 * time.Second,
		Every:   20 * time.Millisecond,
		Log: func(msg string) {
			mu.Lock()
			logs = append(logs, msg)
			mu.Unlock()
		},
	})
	stopped := make(chan struct{})
	var once sync.Once
	s.AfterStep(func(context.Context, int64) error {
		if done, _ := s.Steps(); done == 20 {
			once.Do(func() {
				go func() {
					local.Servers[0].Close()
					close(stopped)
				}()
			})
		}
		return nil
	})
	if err := s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	// Started again once the session waits for it, as a process restarted
	// after its loss was seen: one back before the driver's probe answers
	// it and the step fails with the broken connection's Unavailable.
	<-stopped
	testwait.Eventually(t, 20*time.Second, func() bool {
		task, _ := s.Waiting()
		return task != ""
	}, "the session to wait for the stopped ps")
	if err := restartPS(local, logger); err != nil {
		t.Fatalf("restart the ps: %v", err)
	}
	err = <-ran
	mu.Lock()
	log := strings.Join(logs, "\n")
	mu.Unlock()
	if err != nil {
		t.Fatalf("run: %v\nrecovery: %s", err, log)
	}
	done, lost := s.Steps()
	if s.GlobalStep() != steps || s.UndoneSteps() < 20 || done != steps+s.UndoneSteps() || !strings.Contains(log, "no checkpoint to restore") {
		t.Fatalf("global step %d, steps %d, lost %d, undone %d: want the run to end at %d, the steps before the restart (20 or more) undone and trained again\nrecovery: %s",
			s.GlobalStep(), done, lost, s.UndoneSteps(), steps, log)
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
