package cluster

import (
	"testing"

	"github.com/starwire/starwire/rpc/tcp"
)

func TestRoleCoreNumber(t *testing.T) {
	tests := []struct {
		core, ps, worker string
		job              string
		peers, want      int
	}{
		{"", "", "", "worker", 0, tcp.DefaultReactors},
		{"2", "", "", "worker", 0, 2},
		{"2", "8", "", "ps", 0, 8},
		{"2", "8", "", "worker", 0, 2},
		{"", "8", "3", "worker", 0, 3},
		{"", "8", "3", "chief", 0, 3}, // a chief is a worker, as in DeepRec
		{"", "8", "", "ps", 5, 5},     // capped by the peers
		{"junk", "", "-1", "worker", 0, tcp.DefaultReactors},
		{"100000", "", "", "worker", 0, tcp.DefaultReactors},
	}
	for _, tt := range tests {
		t.Setenv(EnvCoreNumber, tt.core)
		t.Setenv(EnvPSCoreNumber, tt.ps)
		t.Setenv(EnvWorkerCoreNumber, tt.worker)
		if got := RoleCoreNumber(tt.job, tt.peers); got != tt.want {
			t.Errorf("core=%q ps=%q worker=%q: RoleCoreNumber(%s, %d) = %d, want %d",
				tt.core, tt.ps, tt.worker, tt.job, tt.peers, got, tt.want)
		}
	}
}

// TestReactorsSaysWhy: the count names the variable it came from and, when
// a variable asked for more reactors than connections, warns in one line
// with the value used.
func TestReactorsSaysWhy(t *testing.T) {
	t.Setenv(EnvCoreNumber, "")
	t.Setenv(EnvPSCoreNumber, "")
	t.Setenv(EnvWorkerCoreNumber, "")
	if r := Reactors("ps", 0); r.String() != "4 (default)" || r.Warning() != "" {
		t.Errorf("unset: %q, warning %q", r, r.Warning())
	}
	if r := Reactors("ps", 2); r.String() != "2 (default, capped at 2 connections)" || r.Warning() != "" {
		t.Errorf("default over 2 connections: %q, warning %q", r, r.Warning())
	}
	t.Setenv(EnvPSCoreNumber, "16")
	r := Reactors("ps", 3)
	if r.String() != "3 (NETWORK_PS_CORE_NUMBER=16, capped at 3 connections)" {
		t.Errorf("capped: %q", r)
	}
	if want := "NETWORK_PS_CORE_NUMBER=16 is more than the task's 3 connections; using 3 reactors"; r.Warning() != want {
		t.Errorf("warning %q, want %q", r.Warning(), want)
	}
	t.Setenv(EnvCoreNumber, "2")
	if r := Reactors("worker", 8); r.String() != "2 (SEASTAR_CORE_NUMBER=2)" || r.Warning() != "" {
		t.Errorf("worker: %q, warning %q", r, r.Warning())
	}
}
