package lr

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
)

// setupLocal starts an in-process cluster for cfg whose tasks checkpoint
// in dir, and a job set up on it.
func setupLocal(ctx context.Context, t testing.TB, cfg Config, dir string) *job {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	local, err := tasks.StartLocal(tasks.LocalOptions{PS: cfg.PS, Workers: cfg.Workers, Protocol: cluster.ProtocolGRPCSeastar,
		Dir: t.TempDir(), Logger: logger, CheckpointDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(local.Close)
	_, callers := callersOf(t, local)
	job := newJob(t, cfg, driver.New("test-session", callers...))
	if err := job.s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.s.Close(context.Background()) })
	return job
}

// byID returns the rows of a table saved in shards shards in id order.
func byID(t *testing.T, prefix, name string, vocab, dim, shards int) []float32 {
	t.Helper()
	r, err := checkpoint.Open(prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tt, err := r.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	saved := tensor.View[float32](tt.Data)
	if len(saved) != vocab*dim {
		t.Fatalf("%s %q: %d values, want %d", prefix, name, len(saved), vocab*dim)
	}
	c := Config{Vocab: vocab, PS: shards}
	out := make([]float32, 0, len(saved))
	for id := range vocab {
		row := c.shardOffset(id%shards) + int64(id/shards)
		out = append(out, saved[row*int64(dim):(row+1)*int64(dim)]...)
	}
	return out
}

// TestSaveRestore trains on 2 parameter servers, saves, and restores into
// jobs of 2, 3 and 1 servers: each must hold the saved table and
// accumulator row for row (checked by saving it again) and evaluate the
// held-out set to the same loss.
func TestSaveRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := DefaultConfig()
	cfg.PS, cfg.Steps, cfg.Vocab, cfg.HeldOut, cfg.BatchSize = 2, 40, 1001, 512, 128
	dir := t.TempDir()
	a := setupLocal(ctx, t, cfg, dir)
	if _, _, err := a.Restore(ctx, dir); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("restore from an empty dir: %v, want ErrNoCheckpoint", err)
	}
	if _, err := a.run(ctx); err != nil {
		t.Fatal(err)
	}
	step := a.GlobalStep()
	if step != cfg.TotalSteps() {
		t.Fatalf("global step %d after %d steps", step, cfg.TotalSteps())
	}
	prefix, err := a.Save(ctx, dir, step, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "model.ckpt-80"); prefix != want {
		t.Fatalf("saved %s, want %s", prefix, want)
	}
	if _, err := os.Stat(prefix + "_temp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the parts' directory is left: %v", err)
	}
	wantLoss, _, err := a.evaluate(ctx, a.heldOut())
	if err != nil {
		t.Fatal(err)
	}
	wantTable := byID(t, prefix, ckptTable, cfg.Vocab, cfg.EmbeddingDim, 2)
	wantAccum := byID(t, prefix, ckptAccum, cfg.Vocab, cfg.EmbeddingDim, 2)

	other := cfg
	other.Vocab++
	if _, _, err := setupLocal(ctx, t, other, dir).Restore(ctx, dir); !errors.Is(err, checkpoint.ErrMismatch) {
		t.Errorf("restore into a larger table: %v, want ErrMismatch", err)
	}
	for _, ps := range []int{2, 3, 1} {
		c := cfg
		c.PS = ps
		b := setupLocal(ctx, t, c, dir)
		got, gotPrefix, err := b.Restore(ctx, dir)
		if err != nil {
			t.Fatalf("--ps %d: %v", ps, err)
		}
		if got != step || gotPrefix != prefix || b.GlobalStep() != step {
			t.Fatalf("--ps %d: restored %s at step %d (job at %d), want %s at %d", ps, gotPrefix, got, b.GlobalStep(), prefix, step)
		}
		loss, _, err := b.evaluate(ctx, b.heldOut())
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(loss-wantLoss) > 1e-6 {
			t.Errorf("--ps %d: held-out loss %.7f after restore, %.7f when saved", ps, loss, wantLoss)
		}
		// The tasks write only inside their checkpoint directory.
		again := filepath.Join(dir, "ps"+itoa(ps))
		if err := os.Mkdir(again, 0o755); err != nil {
			t.Fatal(err)
		}
		p2, err := b.Save(ctx, again, got, 0)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string][]float32{ckptTable: wantTable, ckptAccum: wantAccum} {
			gotRows := byID(t, p2, name, cfg.Vocab, cfg.EmbeddingDim, ps)
			for i := range want {
				if gotRows[i] != want[i] {
					t.Fatalf("--ps %d: %s of id %d[%d] = %v, saved %v", ps, name, i/cfg.EmbeddingDim, i%cfg.EmbeddingDim, gotRows[i], want[i])
				}
			}
		}
	}
}

// TestSaveKeeps saves five checkpoints keeping three: the state lists the
// newest three and the older ones' files are gone.
func TestSaveKeeps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := DefaultConfig()
	cfg.PS, cfg.Vocab, cfg.HeldOut = 2, 100, 256
	dir := t.TempDir()
	j := setupLocal(ctx, t, cfg, dir)
	for step := int64(1); step <= 5; step++ {
		if _, err := j.Save(ctx, dir, step*10, 3); err != nil {
			t.Fatal(err)
		}
	}
	st, err := checkpoint.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"model.ckpt-30", "model.ckpt-40", "model.ckpt-50"}
	if st.ModelCheckpointPath != "model.ckpt-50" || len(st.AllModelCheckpointPaths) != 3 {
		t.Fatalf("state %+v, want newest model.ckpt-50 of %v", st, want)
	}
	for i, p := range want {
		if st.AllModelCheckpointPaths[i] != p {
			t.Errorf("state lists %v, want %v", st.AllModelCheckpointPaths, want)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "model.ckpt-*"))
	if err != nil {
		t.Fatal(err)
	}
	// Each kept checkpoint is an index and one data file per server.
	if len(files) != 3*(1+cfg.PS) {
		t.Errorf("files %v, want those of %v", files, want)
	}
	step, prefix, err := j.Restore(ctx, dir)
	if err != nil || step != 50 || prefix != filepath.Join(dir, "model.ckpt-50") {
		t.Errorf("restore: %s at %d, %v; want model.ckpt-50 at 50", prefix, step, err)
	}
}

// BenchmarkSave saves the default job's model (vocab 100000, dim 8) on one
// and two parameter servers; restore reads it back.
func BenchmarkSave(b *testing.B) {
	for _, ps := range []int{1, 2} {
		b.Run("ps"+itoa(ps), func(b *testing.B) {
			ctx := context.Background()
			cfg := DefaultConfig()
			cfg.PS = ps
			dir := b.TempDir()
			j := setupLocal(ctx, b, cfg, dir)
			b.ReportAllocs()
			b.SetBytes(2 * int64(cfg.Vocab) * int64(cfg.EmbeddingDim) * 4)
			for i := range b.N {
				if _, err := j.Save(ctx, dir, int64(i), 2); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			start := time.Now()
			if _, _, err := j.Restore(ctx, dir); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds()), "restore-us")
		})
	}
}
