package flags

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/starwire/starwire/rpc/cluster"
)

// TestPrefixUsage checks that naming the command keeps a usage error one
// (exit status 2) and a run's error a run's error.
func TestPrefixUsage(t *testing.T) {
	var ue *UsageError
	if err := PrefixUsage("serve", Usagef("--task %d", -1)); !errors.As(err, &ue) || err.Error() != "serve: --task -1" {
		t.Errorf("usage error: %v (%T)", err, err)
	}
	run := errors.New("refused")
	if err := PrefixUsage("serve", run); errors.As(err, &ue) || !errors.Is(err, run) || err.Error() != "serve: refused" {
		t.Errorf("run error: %v (%T)", err, err)
	}
	if err := PrefixUsage("serve", nil); err != nil {
		t.Errorf("nil: %v", err)
	}
}

// TestParse checks Parse's three outcomes: -h lists the flags and the
// variables, a bad flag or a stray argument is one usage error.
func TestParse(t *testing.T) {
	newSet := func() *flag.FlagSet {
		fs := flag.NewFlagSet("health", flag.ContinueOnError)
		fs.String("addr", "", "the task's address")
		return fs
	}
	var out bytes.Buffer
	err := Parse(newSet(), []string{"-h"}, &out, []string{cluster.EnvTLSDir})
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "-addr") || !strings.Contains(out.String(), cluster.EnvTLSDir) {
		t.Errorf("-h: %v, printed %q", err, out.String())
	}
	var ue *UsageError
	for _, args := range [][]string{{"--nope"}, {"--addr", "a", "stray"}} {
		if err := Parse(newSet(), args, &out, nil); !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), "health: ") {
			t.Errorf("%q: %v (%T), want a usage error naming the command", args, err, err)
		}
	}
}

// TestChooseTransport checks that an unknown --transport is a usage error.
func TestChooseTransport(t *testing.T) {
	if tr, err := ChooseTransport("serve", "udp"); err != nil || tr.Net.Name() == "" {
		t.Errorf("udp: %v, %+v", err, tr)
	}
	var ue *UsageError
	if _, err := ChooseTransport("serve", "quic"); !errors.As(err, &ue) {
		t.Errorf("quic: %v (%T), want a usage error", err, err)
	}
}
