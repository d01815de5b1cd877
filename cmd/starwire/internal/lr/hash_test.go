package lr

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
	"github.com/starwire/starwire/train"
)

// TestHashEmbedding trains the hash embedding, its ids the 64-bit hashes
// of the features' strings, on two parameter servers: its held-out loss
// must drop, and end near a fixed table of one row per feature trained on
// the same examples (a vocabulary holding every id), which differs only
// in the rows' initial values.
func TestHashEmbedding(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PS, cfg.Steps, cfg.Values, cfg.HeldOut = 2, 600, 2000, 4096
	fixed := cfg
	fixed.Vocab = cfg.Fields * cfg.Values
	cfg.Embedding = EmbeddingHash
	hash := trainLocal(t, cluster.ProtocolGRPCSeastar, cfg)
	if hash.FinalLoss > 0.9*hash.InitialLoss {
		t.Errorf("hash embedding: held-out loss %.4f -> %.4f: did not drop by 10%%", hash.InitialLoss, hash.FinalLoss)
	}
	vocab := trainLocal(t, cluster.ProtocolGRPCSeastar, fixed)
	if hash.BayesLoss != vocab.BayesLoss {
		t.Fatalf("hidden model's loss %.6f with hash ids, %.6f with the vocabulary: not the same examples", hash.BayesLoss, vocab.BayesLoss)
	}
	if d := hash.FinalLoss - vocab.FinalLoss; math.Abs(d) > 0.02 {
		t.Errorf("held-out loss %.4f with the hash embedding, %.4f with a table of every feature", hash.FinalLoss, vocab.FinalLoss)
	}
}

// TestHashEmbeddingFilter: with filter_freq, the gradients of ids seen
// fewer times are dropped, so that the model learns, but less than
// without.
func TestHashEmbeddingFilter(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Embedding, cfg.Steps, cfg.Values, cfg.HeldOut = EmbeddingHash, 100, 2000, 2048
	all := trainLocal(t, cluster.ProtocolGRPCSeastar, cfg)
	cfg.FilterFreq = 50
	filtered := trainLocal(t, cluster.ProtocolGRPCSeastar, cfg)
	if filtered.FinalLoss > 0.95*filtered.InitialLoss || filtered.FinalLoss <= all.FinalLoss {
		t.Errorf("held-out loss %.4f -> %.4f with filter_freq 50, %.4f without: want a drop, less than without", filtered.InitialLoss, filtered.FinalLoss, all.FinalLoss)
	}
}

// TestHashEmbeddingSettings: the settings of one kind of table are refused
// with the other, naming the setting.
func TestHashEmbeddingSettings(t *testing.T) {
	for _, tc := range []struct {
		change  func(*Config)
		setting string
		want    string
	}{
		{func(c *Config) { c.FilterFreq = 3 }, "filter_freq", "hash embedding"},
		{func(c *Config) { c.StepsToLive = 10 }, "steps_to_live", "hash embedding"},
		{func(c *Config) { c.Embedding = "dense" }, "embedding", `"fixed" or "hash"`},
		{func(c *Config) { c.Embedding, c.FilterFreq = EmbeddingHash, -1 }, "filter_freq", ">= 0"},
		{func(c *Config) { c.Values = -1 }, "values", ">= 0"},
	} {
		c := DefaultConfig()
		tc.change(&c)
		var se *SettingError
		if err := c.Validate(); !errors.As(err, &se) || se.Setting != tc.setting || !strings.Contains(se.Want, tc.want) {
			t.Errorf("%+v: %v, want a SettingError of %s saying %q", c, err, tc.setting, tc.want)
		}
	}
	c := DefaultConfig()
	c.Embedding, c.Vocab, c.FilterFreq, c.StepsToLive = EmbeddingHash, 1, 2, 100 // no table to size
	if err := c.Validate(); err != nil {
		t.Errorf("hash embedding: %v", err)
	}
}

// TestHashEmbeddingRecovers stops ps 0 of two mid-run and starts it
// again, empty: with no checkpoint to restore, the job initializes every
// server's embedding variable again (the one that lived keeps its rows,
// its slot too) and trains on from global step 0 to the end.
func TestHashEmbeddingRecovers(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Embedding, cfg.PS, cfg.Steps, cfg.Values, cfg.HeldOut = EmbeddingHash, 2, 200, 2000, 1024
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	local, err := tasks.StartLocal(tasks.LocalOptions{PS: 2, Workers: 2, Protocol: cluster.ProtocolGRPCSeastar, Dir: t.TempDir(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	peers, callers := callersOf(t, local)
	d := driver.New("hash-recover-test", callers...)
	d.Watch(2 * time.Second)
	job := newJob(t, cfg, d)
	r := &restarter{t: t, local: local, peers: peers, d: d, logger: logger}
	var logMu sync.Mutex
	var logs []string
	job.s.RecoverTasks(train.RecoverOptions{Rejoin: r, Timeout: 20 * time.Second, Every: 20 * time.Millisecond, Log: func(msg string) {
		logMu.Lock()
		logs = append(logs, msg)
		logMu.Unlock()
	}})
	if err := job.s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer job.s.Close(ctx)
	var once sync.Once
	job.s.AfterStep(func(ctx context.Context, step int64) error {
		if step >= 150 {
			once.Do(func() { go r.stop() })
		}
		return nil
	})
	job.s.StopAtStep(cfg.TotalSteps())
	sum, err := job.run(ctx)
	logMu.Lock()
	log := strings.Join(logs, "\n")
	logMu.Unlock()
	if err != nil {
		t.Fatalf("run: %v\nrecovery: %s", err, log)
	}
	t.Logf("steps %d, lost %d, undone %d, held-out %.4f -> %.4f\n%s", sum.Steps, sum.LostSteps, sum.UndoneSteps, sum.InitialLoss, sum.FinalLoss, log)
	if !strings.Contains(log, "answers again") || !strings.Contains(log, "no checkpoint to restore") {
		t.Fatalf("the ps was not lost, found again and started afresh:\n%s", log)
	}
	// ps 1 stayed up and kept its rows: the log must not say otherwise.
	if want := "/job:ps/replica:0/task:0 restarted and starts afresh, the other parameter servers keep their variables"; !strings.Contains(log, want) || strings.Contains(log, "every parameter server starts afresh") {
		t.Fatalf("recovery log does not say that only ps 0 started afresh (want %q):\n%s", want, log)
	}
	if sum.UndoneSteps <= 0 || sum.GlobalStep != cfg.TotalSteps() {
		t.Errorf("undone %d, ended at global step %d: want steps undone and the run to reach %d", sum.UndoneSteps, sum.GlobalStep, cfg.TotalSteps())
	}
	if sum.FinalLoss > 0.9*sum.InitialLoss {
		t.Errorf("held-out loss %.4f -> %.4f after the recovery", sum.InitialLoss, sum.FinalLoss)
	}
}

// hashJob sets up a job of cfg on a fresh in-process cluster whose tasks
// may use dir for checkpoints.
func hashJob(t *testing.T, ctx context.Context, cfg Config, dir string) *job {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	local, err := tasks.StartLocal(tasks.LocalOptions{PS: cfg.PS, Workers: cfg.Workers, Protocol: cluster.ProtocolGRPCSeastar, Dir: t.TempDir(), Logger: logger, CheckpointDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(local.Close)
	_, callers := callersOf(t, local)
	job := newJob(t, cfg, driver.New("hash-ckpt-"+t.Name(), callers...))
	if err := job.s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.s.Close(context.Background()) })
	return job
}

// TestHashEmbeddingCheckpoint saves a hash embedding trained on two
// parameter servers and restores it into one and into three: each
// restored model's held-out loss before training is the saved model's
// after, the global step the checkpoint's; and a restore into a job of
// another width is refused before anything runs.
func TestHashEmbeddingCheckpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := DefaultConfig()
	cfg.Embedding, cfg.PS, cfg.Steps, cfg.Values, cfg.HeldOut, cfg.FilterFreq = EmbeddingHash, 2, 100, 2000, 1024, 2
	dir := t.TempDir()
	saved := hashJob(t, ctx, cfg, dir)
	sum, err := saved.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := saved.Save(ctx, dir, saved.GlobalStep(), 0); err != nil {
		t.Fatal(err)
	}
	for _, ps := range []int{1, 3} {
		c := cfg
		c.PS, c.Steps = ps, 1
		job := hashJob(t, ctx, c, dir)
		step, _, err := job.Restore(ctx, dir)
		if err != nil {
			t.Fatalf("restore into %d ps: %v", ps, err)
		}
		if step != sum.GlobalStep {
			t.Errorf("restored into %d ps at global step %d, saved at %d", ps, step, sum.GlobalStep)
		}
		loss, _, err := job.Evaluate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(loss-sum.FinalLoss) > 1e-5 {
			t.Errorf("restored into %d ps: held-out loss %.6f, the saved model's %.6f", ps, loss, sum.FinalLoss)
		}
	}
	wide := cfg
	wide.EmbeddingDim = 4
	if _, _, err := hashJob(t, ctx, wide, dir).Restore(ctx, dir); !errors.Is(err, checkpoint.ErrMismatch) {
		t.Errorf("restore of rows of 8 into rows of 4: %v, want ErrMismatch", err)
	}
}

// TestHashEmbeddingEvictsAtSave: with StepsToLive the checkpoint holds
// only rows updated within it of the save's global step: fewer than
// without, and none older.
func TestHashEmbeddingEvictsAtSave(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	saved := func(stepsToLive int64) (rows int, oldest, step int64) {
		cfg := DefaultConfig()
		cfg.Embedding, cfg.PS, cfg.Steps, cfg.Values, cfg.HeldOut, cfg.StepsToLive = EmbeddingHash, 2, 100, 2000, 256, stepsToLive
		dir := t.TempDir()
		job := hashJob(t, ctx, cfg, dir)
		if _, err := job.run(ctx); err != nil {
			t.Fatal(err)
		}
		step = job.GlobalStep()
		prefix, err := job.Save(ctx, dir, step, 0)
		if err != nil {
			t.Fatal(err)
		}
		r, err := checkpoint.Open(prefix)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		oldest = step
		for s := range cfg.PS {
			v, err := r.Read(tableName(s) + "-versions")
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range tensor.View[int64](v.Data) {
				oldest = min(oldest, x)
				rows++
			}
		}
		return rows, oldest, step
	}
	all, _, _ := saved(0)
	kept, oldest, step := saved(20)
	t.Logf("rows saved: %d, with steps_to_live 20 %d (oldest version %d at step %d)", all, kept, oldest, step)
	if kept == 0 || kept >= all || step-oldest > 20 {
		t.Errorf("steps_to_live 20 at step %d saved %d rows of %d, the oldest of version %d", step, kept, all, oldest)
	}
}
