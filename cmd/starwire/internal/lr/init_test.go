package lr

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"
)

// initialTable sets up cfg and returns its table, saved before any step,
// in id order.
func initialTable(ctx context.Context, t *testing.T, cfg Config) []float32 {
	t.Helper()
	dir := t.TempDir()
	job := setupLocal(ctx, t, cfg, dir)
	prefix, err := job.Save(ctx, dir, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return byID(t, prefix, ckptTable, cfg.Vocab, cfg.EmbeddingDim, cfg.PS)
}

// TestTableInit: the table starts as TensorFlow's embedding columns do,
// truncated normal with stddev 1/sqrt(dim) (the truncation at two
// standard deviations leaves 0.88 of it); every row's columns differ, so
// that training can tell them apart; the same seed draws the same table,
// another seed another; an id starts at the same row whatever the number
// of servers, and the two shards hold different values.
func TestTableInit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := DefaultConfig()
	cfg.PS, cfg.Workers, cfg.Vocab, cfg.EmbeddingDim = 2, 1, 2000, 16
	table := initialTable(ctx, t, cfg)
	stddev := 1 / math.Sqrt(float64(cfg.EmbeddingDim))
	var sum, sq float64
	for i, x := range table {
		if math.Abs(float64(x)) > 2*stddev {
			t.Fatalf("value %d = %v, beyond two standard deviations (%v)", i, x, 2*stddev)
		}
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	n := float64(len(table))
	mean, sd := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
	if want := 0.8796 * stddev; math.Abs(mean) > 0.01 || math.Abs(sd-want) > 0.02*want {
		t.Errorf("mean %.4f, stddev %.4f; want 0 and %.4f", mean, sd, want)
	}
	dim := cfg.EmbeddingDim
	for id := range cfg.Vocab {
		row := table[id*dim : (id+1)*dim]
		if slices.Min(row) == slices.Max(row) {
			t.Fatalf("id %d: every column %v", id, row[0])
		}
	}
	if slices.Equal(table[0:dim], table[dim:2*dim]) {
		t.Errorf("ids 0 and 1, on the two shards, start equal: %v", table[:dim])
	}
	if again := initialTable(ctx, t, cfg); !slices.Equal(again, table) {
		t.Error("the same seed drew another table")
	}
	one := cfg
	one.PS = 1
	if single := initialTable(ctx, t, one); !slices.Equal(single, table) {
		t.Error("one server starts another table than two")
	}
	cfg.Seed++
	if other := initialTable(ctx, t, cfg); slices.Equal(other, table) {
		t.Error("another seed drew the same table")
	}
}
