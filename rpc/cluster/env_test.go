package cluster

import (
	"testing"

	"github.com/starwire/starwire/internal/envvar"
	"github.com/starwire/starwire/rpc"
)

func TestRoleCoreNumber(t *testing.T) {
	tests := []struct {
		core, ps, worker string
		job              string
		peers, want      int
	}{
		{"", "", "", "worker", 0, rpc.DefaultReactors},
		{"2", "", "", "worker", 0, 2},
		{"2", "8", "", "ps", 0, 8},
		{"2", "8", "", "worker", 0, 2},
		{"", "8", "3", "worker", 0, 3},
		{"", "8", "", "ps", 5, 5}, // capped by the peers
		{"junk", "", "-1", "worker", 0, rpc.DefaultReactors},
	}
	for _, tt := range tests {
		t.Setenv(envvar.CoreNumber, tt.core)
		t.Setenv(envvar.PSCoreNumber, tt.ps)
		t.Setenv(envvar.WorkerCoreNumber, tt.worker)
		if got := RoleCoreNumber(tt.job, tt.peers); got != tt.want {
			t.Errorf("core=%q ps=%q worker=%q: RoleCoreNumber(%s, %d) = %d, want %d",
				tt.core, tt.ps, tt.worker, tt.job, tt.peers, got, tt.want)
		}
	}
}
