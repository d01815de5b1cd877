package driver

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestRunGraphKeepsRequest: a Caller's RunGraph sends the feeds without
// changing the request it is given, over both protocols, and refuses a
// request that carries send entries of its own.
func TestRunGraphKeepsRequest(t *testing.T) {
	for _, protocol := range []string{"grpc+seastar", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tc := newTestCluster(t, protocol)
			d := tc.driver(t)
			if err := d.CreateSessions(ctx, nil); err != nil {
				t.Fatal(err)
			}
			g, err := d.RegisterGraph(ctx, psTask, &tfpb.GraphDef{Node: []*tfpb.NodeDef{
				recvNode("x", "x:0", workerDev, clientInc, psDev, wire.DTFloat, true),
				identityNode("y", "x", wire.DTFloat),
				sendNode("y/_send", "y", "y:0", psDev, 1, workerDev, wire.DTFloat, true),
			}})
			if err != nil {
				t.Fatal(err)
			}
			c, err := d.Caller(psTask)
			if err != nil {
				t.Fatal(err)
			}
			fetch := key(psDev, 1, workerDev, "y:0")
			req := &tfpb.RunGraphRequest{SessionHandle: d.session, CreateWorkerSessionCalled: true, GraphHandle: g.Handle, StepId: 7, RecvKey: []string{fetch}}
			before := proto.Clone(req)
			feed := floats(1, 2, 3)
			var out handlers.Fetched
			defer out.Release()
			if err := c.RunGraph(ctx, req, []handlers.Feed{{Key: key(workerDev, clientInc, psDev, "x:0"), Tensor: feed}}, &out); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(req, before) {
				t.Errorf("RunGraph changed its request:\n%v\nwas\n%v", req, before)
			}
			if got, ok := out.Lookup(fetch); !ok || string(got.Data) != string(feed.Data) {
				t.Errorf("fetched %+v (found %v), want the feed back", got, ok)
			}
			d.CleanupStep(ctx, 7, psTask)
			req.Send = []*tfpb.NamedTensorProto{{Name: "x"}}
			if err := c.RunGraph(ctx, req, nil, &out); rpc.CodeOf(err) != wire.InvalidArgument {
				t.Errorf("RunGraph with send entries in the request: %v, want InvalidArgument", err)
			}
		})
	}
}
