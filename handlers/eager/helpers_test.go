package eager

import (
	"io"
	"log/slog"
	"testing"

	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/wire/tfpb"
)

const testTask = "/job:ps/replica:0/task:0"

// newTestService returns a service on opts (a fresh ps Env when it has
// none), closed when the test ends.
func newTestService(t *testing.T, opts Options) *Service {
	t.Helper()
	if opts.Env == nil {
		opts.Env = &ops.Env{Task: testTask, Rendezvous: rendezvous.New(), Vars: ops.NewVariables()}
	}
	if opts.Devices == nil {
		opts.Devices = []*tfpb.DeviceAttributes{{Name: testTask + "/device:CPU:0", DeviceType: "CPU", Incarnation: 7}}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
