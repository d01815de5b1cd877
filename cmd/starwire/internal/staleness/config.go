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
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("staleness: bad configuration")

// Config describes one benchmark run.
type Config struct {
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
	}
	return nil
}
