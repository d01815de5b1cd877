package lr

import (
	"fmt"
	"time"

	"github.com/starwire/starwire/handlers/compute"
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
	// Compute, when set, bounds the workers' batch drawing together with
	// the tasks' kernels that share it (see package compute); nil means
	// no bound.
	Compute *compute.Limit
}

// DefaultConfig returns the job "starwire train" runs without flags.
func DefaultConfig() Config {
	return Config{
		PS: 1, Workers: 2, Steps: 2000, BatchSize: 256, EmbeddingDim: 8, Vocab: 100000, Fields: 8,
		LearningRate: 0.2, InitialAccumulator: 0.1, HeldOut: 8192, Seed: 1, ProgressEvery: 2 * time.Second,
	}
}

// A SettingError says which setting of a Config cannot run. Setting is
// named as the command's flag is (steps, batch_size, ...).
type SettingError struct {
	Setting string
	Value   any
	Want    string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("%s %v, want %s", e.Setting, e.Value, e.Want)
}

// Validate reports the first setting that cannot run, as a *SettingError.
func (c Config) Validate() error {
	bad := func(setting string, value any, want string) error {
		return &SettingError{Setting: setting, Value: value, Want: want}
	}
	switch {
	case c.PS <= 0:
		return bad("ps", c.PS, "> 0")
	case c.Workers <= 0:
		return bad("workers", c.Workers, "> 0")
	case c.Steps <= 0:
		return bad("steps", c.Steps, "> 0")
	case c.BatchSize <= 0 || c.BatchSize > 1<<16:
		return bad("batch_size", c.BatchSize, "1..65536")
	case c.EmbeddingDim <= 0 || c.EmbeddingDim > 1024:
		return bad("embedding_dim", c.EmbeddingDim, "1..1024")
	case c.Vocab < max(c.PS, c.Fields, 2):
		return bad("vocab", c.Vocab, fmt.Sprintf("at least %d: no fewer ids than an example's fields (%d), the parameter servers (%d) or two", max(c.PS, c.Fields, 2), c.Fields, c.PS))
	case int64(c.Vocab)*int64(c.EmbeddingDim) > 1<<28:
		return bad("vocab", c.Vocab, fmt.Sprintf("at most %d with embedding_dim %d (a table of at most 1 GiB)", (1<<28)/c.EmbeddingDim, c.EmbeddingDim))
	case c.Fields <= 0:
		return bad("fields", c.Fields, "> 0")
	case !(c.LearningRate > 0):
		return bad("learning_rate", c.LearningRate, "> 0")
	case !(c.InitialAccumulator > 0):
		return bad("initial_accumulator", c.InitialAccumulator, "> 0")
	case c.HeldOut <= 0:
		return bad("held_out", c.HeldOut, "> 0")
	case c.ProgressEvery <= 0:
		return bad("progress", c.ProgressEvery, "> 0")
	}
	return nil
}

// TotalSteps is the steps of all workers together.
func (c Config) TotalSteps() int64 { return int64(c.Steps) * int64(c.Workers) }

// shardRows is the number of table rows parameter server p holds: ids are
// spread over the servers by id mod PS, and id lives at row id / PS.
func (c Config) shardRows(p int) int64 { return int64((c.Vocab - p + c.PS - 1) / c.PS) }

// TransportConfig returns the transport-bound shape of the job ("starwire
// train --preset transport"): 32 features per example on a 32-wide
// embedding, so that a worker's step pulls 4× the rows of DefaultConfig's,
// each 4× wider (1 MiB of rows a step instead of 64 KiB), while the model
// stays a logistic regression: pulling rows and pushing their gradients
// take most of a step, and the transport's speed shows in the job's.
func TransportConfig() Config {
	c := DefaultConfig()
	c.Fields, c.EmbeddingDim, c.Steps = 32, 32, 500
	return c
}
