package staleness

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/netns"
)

func TestRunBothProtocols(t *testing.T) {
	// Small blobs, so that even gRPC under the race detector on a loaded
	// machine keeps up with the push rate.
	cfg := Config{
		DataSize:  64 << 10,
		PushEvery: 20 * time.Millisecond,
		PullEvery: 20 * time.Millisecond,
		StepEvery: 2 * time.Millisecond,
		Workers:   2,
		Duration:  500 * time.Millisecond,
	}
	for _, proto := range []string{ProtocolStarwire, ProtocolGRPC} {
		t.Run(proto, func(t *testing.T) {
			res, err := Run(context.Background(), proto, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
			if res.Versions < 4 {
				t.Errorf("%d versions published in %v, want at least 4", res.Versions, cfg.Duration)
			}
			if res.Pull.Count() < 3 {
				t.Errorf("%d pulls moved a blob, want at least 3", res.Pull.Count())
			}
			if res.Samples < 20 {
				t.Errorf("%d staleness samples, want at least 20", res.Samples)
			}
			if res.Corrupted != 0 {
				t.Errorf("%d pulled blobs carried the wrong version", res.Corrupted)
			}
			if res.MeanStaleness < 0 || res.MeanStaleness > float64(res.Versions) {
				t.Errorf("mean staleness %.2f outside [0, %d]", res.MeanStaleness, res.Versions)
			}
		})
	}
}

// TestRunOverAFXDP runs the benchmark with the server in a namespace of
// its own, reached by every peer over AF_XDP on a veth pair.
func TestRunOverAFXDP(t *testing.T) {
	netns.Require(t)
	cfg := Config{
		DataSize:  256 << 10,
		PushEvery: 20 * time.Millisecond,
		PullEvery: 20 * time.Millisecond,
		StepEvery: 2 * time.Millisecond,
		Workers:   2,
		Duration:  500 * time.Millisecond,
	}
	res, err := Run(context.Background(), ProtocolAFXDP, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if res.Versions < 4 || res.Pull.Count() < 3 {
		t.Errorf("%d versions and %d pulls with data, want at least 4 and 3", res.Versions, res.Pull.Count())
	}
	if res.Corrupted != 0 {
		t.Errorf("%d pulled blobs carried the wrong version", res.Corrupted)
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"data size", func(c *Config) { c.DataSize = 0 }},
		{"push", func(c *Config) { c.PushEvery = 0 }},
		{"pull", func(c *Config) { c.PullEvery = -1 }},
		{"step", func(c *Config) { c.StepEvery = 0 }},
		{"workers", func(c *Config) { c.Workers = 0 }},
		{"duration", func(c *Config) { c.Duration = 0 }},
	} {
		c := good
		tc.edit(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: Validate() = %v, want ErrConfig", tc.name, err)
		}
	}
	if err := good.Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
	if _, err := Run(context.Background(), "carrier-pigeon", good); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown protocol: %v, want ErrConfig", err)
	}
}
