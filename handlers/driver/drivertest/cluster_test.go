package drivertest

import (
	"context"
	"testing"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestTaskKillAndRestart: a task answers, fetching a loss for each key;
// restarted, its RunGraph fails as a broken connection's, it answers
// with a new incarnation at once and its old graphs are gone; killed, it
// fails every call; closed, as a closed client.
func TestTaskKillAndRestart(t *testing.T) {
	ctx := context.Background()
	c := &Cluster{}
	ps := c.Task("/job:ps/replica:0/task:0", 1)
	reg := func() string {
		t.Helper()
		resp, err := ps.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetGraphHandle()
	}
	run := func(handle string) error {
		var out handlers.Fetched
		defer out.Release()
		err := ps.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: handle, RecvKey: []string{"loss"}}, nil, &out)
		if err == nil && (len(out.Tensors) != 1 || out.Keys[0] != "loss") {
			t.Fatalf("fetched %v for [loss]", out.Keys)
		}
		return err
	}
	old := reg()
	if err := run(old); err != nil {
		t.Fatalf("run: %v", err)
	}
	c.RestartNext(ps)
	if err := run(old); rpc.CodeOf(err) != wire.Unavailable {
		t.Fatalf("run across the restart: %v, want Unavailable", err)
	}
	if st, err := ps.GetStatus(ctx); err != nil || st.GetDeviceAttributes()[0].GetIncarnation() != 2 || ps.Incarnation() != 2 {
		t.Fatalf("status after the restart: %v, %v: want incarnation 2", st, err)
	}
	if err := run(old); rpc.CodeOf(err) != wire.Aborted {
		t.Errorf("run of a graph from before the restart: %v, want Aborted", err)
	}
	if err := run(reg()); err != nil {
		t.Errorf("run of a graph registered since: %v", err)
	}
	c.KillNext(ps)
	if err := run(reg()); rpc.CodeOf(err) != wire.Unavailable {
		t.Fatalf("run of the killed task: %v, want Unavailable", err)
	}
	if _, err := ps.GetStatus(ctx); rpc.CodeOf(err) != wire.Unavailable {
		t.Errorf("status of the dead task: %v, want Unavailable", err)
	}
	w := c.Task("/job:worker/replica:0/task:0", 1)
	w.Close()
	if err := w.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{}); err == nil {
		t.Error("a closed Caller's call succeeded")
	}
}
