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
	// Vocab is the number of hashed feature ids, the table's rows, with
	// the fixed table; the hash embedding has no vocabulary.
	Vocab int
	// Embedding is the table's kind: EmbeddingFixed, Vocab rows the
	// features are hashed into, sharded over the servers as resource
	// variables; or EmbeddingHash, ids of the 64-bit space (the features'
	// strings hashed), an embedding variable on each server whose rows are
	// made on first lookup (package embedding, DeepRec's Kv ops).
	Embedding string
	// Values is the click data's raw values per field. 0, with the fixed
	// table, draws the default job's data: Vocab values per field, hashed
	// into Vocab ids whose hidden weights they share. Otherwise (and
	// always with the hash embedding, 0 then meaning Vocab) every feature
	// has a hidden weight of its own, and its id is field*Values+value
	// modulo Vocab with the fixed table (no two features share a row when
	// Vocab >= Fields*Values), its string's 64-bit hash with the hash
	// embedding: the same examples and labels under either.
	Values int
	// FilterFreq is, with the hash embedding, the lookups of an id before
	// its row is made (DeepRec's filter_freq); until then it reads the
	// initial value and its gradients are dropped. 0 admits every id.
	FilterFreq int64
	// StepsToLive is, with the hash embedding, how many global steps a
	// row may go without an update before it is evicted, which is done
	// when a checkpoint is saved (DeepRec's steps_to_live). 0 never
	// evicts.
	StepsToLive int64
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
		PS: 1, Workers: 2, Steps: 2000, BatchSize: 256, EmbeddingDim: 8, Vocab: 100000, Embedding: EmbeddingFixed, Fields: 8,
		LearningRate: 0.2, InitialAccumulator: 0.1, HeldOut: 8192, Seed: 1, ProgressEvery: 2 * time.Second,
	}
}

// The kinds of Config.Embedding.
const (
	EmbeddingFixed = "fixed"
	EmbeddingHash  = "hash"
)

// hash reports whether the job's embedding is the hash embedding.
func (c Config) hash() bool { return c.Embedding == EmbeddingHash }

// values returns the click data's raw values per field.
func (c Config) values() int {
	if c.Values == 0 {
		return c.Vocab
	}
	return c.Values
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
	case c.Embedding != EmbeddingFixed && c.Embedding != EmbeddingHash:
		return bad("embedding", fmt.Sprintf("%q", c.Embedding), `"fixed" or "hash"`)
	case c.Values < 0:
		return bad("values", c.Values, ">= 0")
	case c.FilterFreq < 0:
		return bad("filter_freq", c.FilterFreq, ">= 0")
	case c.StepsToLive < 0:
		return bad("steps_to_live", c.StepsToLive, ">= 0")
	case !c.hash() && c.FilterFreq != 0:
		return bad("filter_freq", c.FilterFreq, "0 with the fixed table (admission is the hash embedding's: --embedding hash)")
	case !c.hash() && c.StepsToLive != 0:
		return bad("steps_to_live", c.StepsToLive, "0 with the fixed table (eviction is the hash embedding's: --embedding hash)")
	case c.hash() && c.values() <= 0:
		return bad("values", c.Values, "> 0 with the hash embedding")
	case !c.hash() && c.Vocab < max(c.PS, c.Fields, 2):
		return bad("vocab", c.Vocab, fmt.Sprintf("at least %d: no fewer ids than an example's fields (%d), the parameter servers (%d) or two", max(c.PS, c.Fields, 2), c.Fields, c.PS))
	case !c.hash() && int64(c.Vocab)*int64(c.EmbeddingDim) > 1<<28:
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

// defaultRows is the rows of the hash embedding's default value matrix,
// DeepRec's default_value_dim: a new row starts as row id mod
// defaultRows of it.
const defaultRows = 4096

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
