package lr

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
)

// trainLocal trains cfg on an in-process cluster over protocol.
func trainLocal(t *testing.T, protocol cluster.Protocol, cfg Config) *summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	local, err := tasks.StartLocal(tasks.LocalOptions{PS: cfg.PS, Workers: cfg.Workers, Protocol: protocol, Dir: t.TempDir(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(local.Close)
	_, callers := callersOf(t, local)
	d := driver.New("test-session", callers...)
	job := newJob(t, cfg, d)
	job.stats = func() handlers.Stats {
		c, b := local.PeerStats()
		return d.Stats().Add(handlers.Stats{Calls: c, Bytes: b})
	}
	job.taskStats = func(task string) handlers.Stats {
		c, _ := d.Caller(task)
		calls, bytes := local.TaskPeerStats(task)
		return c.Stats().Add(handlers.Stats{Calls: calls, Bytes: bytes})
	}
	if err := job.s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	sum, err := job.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.s.Close(ctx); err != nil {
		t.Errorf("close: %v", err)
	}
	t.Logf("%s: loss %.4f -> %.4f (train %.4f -> %.4f, bayes %.4f, base %.4f), accuracy %.3f, %d steps, %.0f examples/s, %d calls, %d bytes",
		protocol, sum.InitialLoss, sum.FinalLoss, sum.FirstTrainLoss, sum.LastTrainLoss, sum.BayesLoss, sum.BaseRateLoss, sum.Accuracy, sum.Steps, sum.ExamplesPerSec(cfg.BatchSize), sum.Calls, sum.Bytes)
	return sum
}

func TestTrainLossDrops(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Steps, cfg.Vocab, cfg.HeldOut = 150, 5000, 2048
	for _, p := range []cluster.Protocol{cluster.ProtocolGRPCSeastar, cluster.ProtocolGRPC} {
		t.Run(string(p), func(t *testing.T) {
			sum := trainLocal(t, p, cfg)
			if sum.FinalLoss > 0.9*sum.InitialLoss {
				t.Errorf("held-out loss %.4f -> %.4f: did not drop by 10%%", sum.InitialLoss, sum.FinalLoss)
			}
		})
	}
}

// TestShardedEmbedding trains with the table sharded over 1, 2 and 4
// parameter servers: each server of several must move fewer bytes than the
// one server moves alone, and the held-out loss must be the same within
// noise (the updates are the same; only their interleaving differs).
func TestShardedEmbedding(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Steps, cfg.Vocab, cfg.HeldOut = 100, 5000, 2048
	var one *summary
	for _, ps := range []int{1, 2, 4} {
		cfg.PS = ps
		sum := trainLocal(t, cluster.ProtocolGRPCSeastar, cfg)
		if len(sum.PSBytes) != ps {
			t.Fatalf("--ps %d: bytes of %d servers", ps, len(sum.PSBytes))
		}
		t.Logf("--ps %d: bytes per server %v", ps, sum.PSBytes)
		if ps == 1 {
			one = sum
			continue
		}
		for s, b := range sum.PSBytes {
			if b <= 0 || b >= one.PSBytes[0] {
				t.Errorf("--ps %d: server %d moved %d bytes, one server alone %d", ps, s, b, one.PSBytes[0])
			}
		}
		if d := sum.FinalLoss - one.FinalLoss; d > 0.01 || d < -0.01 {
			t.Errorf("--ps %d: held-out loss %.4f, with one server %.4f", ps, sum.FinalLoss, one.FinalLoss)
		}
	}
}

// callersOf returns a caller of every task of local, ps first, and the
// peers they call through, which the test closes.
func callersOf(t testing.TB, local *tasks.Local) (*tasks.Peers, []driver.Caller) {
	t.Helper()
	peers := tasks.NewPeers(local.Layout)
	t.Cleanup(peers.Close)
	var callers []driver.Caller
	for _, job := range []string{"ps", "worker"} {
		for _, i := range local.Layout.Cluster.TaskIndices(job) {
			c, err := peers.Caller(cluster.TaskName(job, i))
			if err != nil {
				t.Fatal(err)
			}
			callers = append(callers, c)
		}
	}
	return peers, callers
}
