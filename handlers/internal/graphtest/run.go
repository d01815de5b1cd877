package graphtest

import (
	"context"
	"testing"

	"github.com/starwire/starwire/handlers/graph"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// Device is the device of the task NewEnv makes, and Incarnation its
// incarnation.
const (
	Device      = "/job:ps/replica:0/task:0/device:CPU:0"
	Incarnation = 7
)

// NewEnv returns the Env of a task named after Device, with a rendezvous,
// variables and a checkpoint directory of its own, and no remote peers.
func NewEnv(t testing.TB) *ops.Env {
	return &ops.Env{Task: "/job:ps/replica:0/task:0", Rendezvous: rendezvous.New(), Vars: ops.NewVariables(), CheckpointDir: t.TempDir()}
}

// errCleaned is what Run cleans its steps up with.
var errCleaned = status.Errorf(wire.Aborted, "step cleaned up")

// Run builds g against env and runs it once, as step 1, with named feeds
// (which it releases), and returns the fetched outputs, released when the
// test ends.
func Run(t testing.TB, env *ops.Env, g *tfpb.GraphDef, feeds map[string]wire.Tensor, fetches ...string) ([]wire.Tensor, error) {
	t.Helper()
	built, err := graph.Build(g, env)
	if err != nil {
		return nil, err
	}
	req := &tfpb.RunGraphRequest{GraphHandle: "test", StepId: 1, RecvKey: fetches}
	var ts []wire.Tensor
	for name, f := range feeds {
		req.Send = append(req.Send, &tfpb.NamedTensorProto{Name: name})
		ts = append(ts, f)
	}
	out, _, err := built.Run(context.Background(), req, ts, false)
	for i := range ts {
		ts[i].Buf.Release()
	}
	env.Rendezvous.Cleanup(1, errCleaned)
	t.Cleanup(func() {
		for i := range out {
			out[i].Buf.Release()
		}
	})
	return out, err
}
