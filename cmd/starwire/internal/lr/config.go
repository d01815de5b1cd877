package lr

import (
	"fmt"
	"time"
)

// Config describes a training job.
type Config struct {
	// PS and Workers are how many parameter-server and worker tasks the
	// job uses: tasks 0..PS-1 of job "ps" and 0..Workers-1 of "worker".
	PS, Workers int
	// Steps is the number of training steps each worker runs.
	Steps int
	// BatchSize is the examples per step and worker.
	BatchSize int
	// EmbeddingDim is the width of the embedding table.
	EmbeddingDim int
	// Vocab is the number of hashed feature ids, the table's rows.
	Vocab int
	// Fields is the number of categorical features per example.
	Fields int
	// LearningRate and InitialAccumulator configure Adagrad.
	LearningRate, InitialAccumulator float32
	// HeldOut is the number of held-out examples evaluated before and after
	// training (rounded up to whole batches).
	HeldOut int
	// Seed fixes the data and the hidden model.
	Seed uint64
	// ProgressEvery is the interval between progress reports.
	ProgressEvery time.Duration
}

// DefaultConfig returns the job "starwire train" runs without flags.
func DefaultConfig() Config {
	return Config{
		PS: 1, Workers: 2, Steps: 2000, BatchSize: 256, EmbeddingDim: 8, Vocab: 100000, Fields: 8,
		LearningRate: 0.2, InitialAccumulator: 0.1, HeldOut: 8192, Seed: 1, ProgressEvery: 2 * time.Second,
	}
}

// Validate reports the first setting that cannot run.
func (c Config) Validate() error {
	switch {
	case c.PS <= 0:
		return fmt.Errorf("lr: %d parameter servers, want > 0", c.PS)
	case c.Workers <= 0:
		return fmt.Errorf("lr: %d workers, want > 0", c.Workers)
	case c.Steps <= 0:
		return fmt.Errorf("lr: %d steps, want > 0", c.Steps)
	case c.BatchSize <= 0 || c.BatchSize > 1<<16:
		return fmt.Errorf("lr: batch size %d, want 1..65536", c.BatchSize)
	case c.EmbeddingDim <= 0 || c.EmbeddingDim > 1024:
		return fmt.Errorf("lr: embedding dimension %d, want 1..1024", c.EmbeddingDim)
	case c.Vocab < c.PS:
		return fmt.Errorf("lr: vocabulary of %d ids for %d parameter servers, want at least one id each", c.Vocab, c.PS)
	case int64(c.Vocab)*int64(c.EmbeddingDim) > 1<<28:
		return fmt.Errorf("lr: table of %d×%d floats is over 1 GiB", c.Vocab, c.EmbeddingDim)
	case c.Fields <= 0:
		return fmt.Errorf("lr: %d fields, want > 0", c.Fields)
	case c.LearningRate <= 0:
		return fmt.Errorf("lr: learning rate %v, want > 0", c.LearningRate)
	case c.InitialAccumulator <= 0:
		return fmt.Errorf("lr: initial accumulator %v, want > 0", c.InitialAccumulator)
	case c.HeldOut <= 0:
		return fmt.Errorf("lr: %d held-out examples, want > 0", c.HeldOut)
	}
	return nil
}

// shardRows is the number of table rows parameter server p holds: ids are
// spread over the servers by id mod PS, and id lives at row id / PS.
func (c Config) shardRows(p int) int64 { return int64((c.Vocab - p + c.PS - 1) / c.PS) }
