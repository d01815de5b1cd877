package lr

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/train"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// savedRows reads every row of the hash embedding in the checkpoint
// under prefix: value, accumulator, version and count, by id.
func savedRows(t *testing.T, prefix string, ps int) map[int64]string {
	t.Helper()
	r, err := checkpoint.Open(prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	read := func(name string) []byte {
		x, err := r.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		return x.Data
	}
	rows := map[int64]string{}
	for s := range ps {
		ids := tensor.View[int64](read(tableName(s) + "-keys"))
		vals, vers, freqs := tensor.View[float32](read(tableName(s)+"-values")), tensor.View[int64](read(tableName(s)+"-versions")), tensor.View[int64](read(tableName(s)+"-freqs"))
		accIDs, acc := tensor.View[int64](read(accumName(s)+"-keys")), tensor.View[float32](read(accumName(s)+"-values"))
		d := len(vals) / max(1, len(ids))
		at := map[int64]int{}
		for i, id := range accIDs {
			at[id] = i
		}
		for i, id := range ids {
			j, ok := at[id]
			if !ok {
				t.Fatalf("%s: id %d has no accumulator", prefix, id)
			}
			rows[id] = fmt.Sprint(vals[i*d:(i+1)*d], acc[j*d:(j+1)*d], vers[i], freqs[i])
		}
	}
	return rows
}

// TestHashEmbeddingIncrements trains the hash embedding on two ps with a
// full checkpoint every 120 global steps and an increment every 10 between,
// then starts a fresh cluster (the job killed after its last increment):
// the restore takes the newest full checkpoint and each of its
// increments, and every row, with its accumulator, version and count, is
// the trained model's; the global step is the last increment's. Each
// increment holds fewer rows than a full checkpoint.
func TestHashEmbeddingIncrements(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := DefaultConfig()
	cfg.Embedding, cfg.PS, cfg.Steps, cfg.Values, cfg.HeldOut = EmbeddingHash, 2, 100, 20000, 256
	dir := t.TempDir()
	job := hashJob(t, ctx, cfg, dir)
	opts := train.SaverOptions{Dir: dir, Steps: 120, IncrSteps: 10, InFlight: int64(4 * cfg.Workers)}
	h := train.NewCheckpointSaverHook(job, opts)
	if restored, _, _, err := h.Begin(ctx); err != nil || restored {
		t.Fatalf("begin: restored %v, %v", restored, err)
	}
	if _, err := job.Save(ctx, dir, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Restore(ctx); err != nil { // the full checkpoint of step 0
		t.Fatal(err)
	}
	job.s.AfterStep(h.AfterStep)
	if _, err := job.run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Increment(ctx); err != nil {
		t.Fatal(err)
	}
	step := job.GlobalStep()
	want := fullRows(t, ctx, job, dir, step)

	base, err := checkpoint.Latest(dir)
	if err != nil {
		t.Fatal(err)
	}
	incrs, err := checkpoint.Increments(dir, base)
	if err != nil || len(incrs) < 2 {
		t.Fatalf("increments of %s: %v, %v; want several", base, incrs, err)
	}
	full := len(savedRows(t, base, cfg.PS))
	for _, p := range incrs {
		if n := len(savedRows(t, p, cfg.PS)); n >= full {
			t.Errorf("%s holds %d rows, the full checkpoint %d", filepath.Base(p), n, full)
		}
	}
	t.Logf("%s: %d rows; %d increments after it, the last %d rows", filepath.Base(base), full, len(incrs), len(savedRows(t, incrs[len(incrs)-1], cfg.PS)))

	fresh := hashJob(t, ctx, cfg, dir)
	fh := train.NewCheckpointSaverHook(fresh, opts)
	restored, prefix, got, err := fh.Begin(ctx)
	if err != nil || !restored || got != step || prefix != incrs[len(incrs)-1] {
		t.Fatalf("restored %v %s at global step %d, %v; want the last increment at %d", restored, prefix, got, err, step)
	}
	if rows := fullRows(t, ctx, fresh, dir, step); !maps.Equal(rows, want) {
		t.Fatalf("restored %d rows, the trained model has %d, or rows differ", len(rows), len(want))
	}

	// The last increment again, on top of itself, is refused.
	if _, err := fresh.ApplyIncrement(ctx, incrs[len(incrs)-1]); status.CodeOf(err) != wire.FailedPrecondition {
		t.Fatalf("an increment applied twice: %v, want FailedPrecondition", err)
	}
}

// fullRows saves job's model in full into a new directory under dir (the
// servers' checkpoint directory) and reads its rows.
func fullRows(t *testing.T, ctx context.Context, job *job, dir string, step int64) map[int64]string {
	t.Helper()
	ref := filepath.Join(dir, fmt.Sprintf("ref-%p", job))
	prefix, err := job.Save(ctx, ref, step, 0)
	if err != nil {
		t.Fatal(err)
	}
	return savedRows(t, prefix, job.cfg.PS)
}
