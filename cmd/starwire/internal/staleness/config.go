package staleness

import (
	"errors"
	"fmt"
	"time"
)

// Protocols the benchmark runs over.
const (
	// ProtocolStarwire is starwire over TCP on loopback.
	ProtocolStarwire = "starwire"
	// ProtocolAFXDP is starwire over AF_XDP: the server in a network
	// namespace of its own, joined to each peer by a veth pair. It needs
	// root.
	ProtocolAFXDP = "afxdp"
	// ProtocolGRPC is gRPC over TCP on loopback.
	ProtocolGRPC = "grpc"
	// ProtocolFilesystem is the benchmark's own baseline: the trainer
	// writes each version to a file in a directory (replacing the newest
	// by a rename), workers read the newest from it. Pull mode only.
	ProtocolFilesystem = "filesystem"
)

// Modes: how a version reaches the workers.
const (
	// ModePull: the trainer pushes each version to the parameter server,
	// and every worker pulls the newest every PullEvery.
	ModePull = "pull"
	// ModePush: workers do not poll. Each holds one standing call to the
	// trainer, which answers every waiting worker with each version as it
	// makes it, from the version's one buffer (over starwire, no copy per
	// worker: each answer's tensor is that memory).
	ModePush = "push"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("staleness: bad configuration")

// Config describes one benchmark run.
type Config struct {
	// Mode is ModePull (the default when empty) or ModePush.
	Mode string
	// Dir is where ProtocolFilesystem writes its versions ("" means a new
	// directory under os.TempDir(), removed after the run).
	Dir string
	// DataSize is the parameter blob's size in bytes.
	DataSize int
	// PushEvery is the trainer's interval between versions.
	PushEvery time.Duration
	// PullEvery is each worker's interval between pulls of the newest version.
	PullEvery time.Duration
	// StepEvery is each worker's interval between staleness samples.
	StepEvery time.Duration
	// Workers is the number of pulling workers.
	Workers int
	// Duration bounds the run of each protocol.
	Duration time.Duration
}

// DefaultConfig returns the seed scenario scaled to a few seconds: 10 MB
// every 0.2 s, four workers pulling every 0.2 s and sampling every 5 ms.
func DefaultConfig() Config {
	return Config{
		DataSize:  10 << 20,
		PushEvery: 200 * time.Millisecond,
		PullEvery: 200 * time.Millisecond,
		StepEvery: 5 * time.Millisecond,
		Workers:   4,
		Duration:  2 * time.Second,
	}
}

// mode returns c.Mode, ModePull when empty.
func (c Config) mode() string {
	if c.Mode == "" {
		return ModePull
	}
	return c.Mode
}

// Validate reports the first setting that cannot run.
func (c Config) Validate() error {
	switch {
	case c.DataSize <= 0:
		return fmt.Errorf("%w: data size %d bytes, want > 0", ErrConfig, c.DataSize)
	case c.DataSize > 1<<30:
		return fmt.Errorf("%w: data size %d bytes, want at most 1 GiB", ErrConfig, c.DataSize)
	case c.PushEvery <= 0:
		return fmt.Errorf("%w: push interval %v, want > 0", ErrConfig, c.PushEvery)
	case c.PullEvery <= 0:
		return fmt.Errorf("%w: pull interval %v, want > 0", ErrConfig, c.PullEvery)
	case c.StepEvery <= 0:
		return fmt.Errorf("%w: step interval %v, want > 0", ErrConfig, c.StepEvery)
	case c.Workers <= 0:
		return fmt.Errorf("%w: %d workers, want > 0", ErrConfig, c.Workers)
	case c.Duration <= 0:
		return fmt.Errorf("%w: duration %v, want > 0", ErrConfig, c.Duration)
	case c.Mode != "" && c.Mode != ModePull && c.Mode != ModePush:
		return fmt.Errorf("%w: mode %q, want %q or %q", ErrConfig, c.Mode, ModePull, ModePush)
	}
	return nil
}
