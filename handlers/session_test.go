package handlers

import (
	"context"
	"errors"
	"testing"

	"github.com/starwire/starwire/handlers/graph"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// sessionVar is variable "v" as each session's graphs name it.
func sessionVar() *tfpb.NodeDef {
	return NodeDef("v", "VarHandleOp", nil, Attrs("dtype", wire.DTFloat, "shape", []int64{}, "shared_name", "v"))
}

// assignGraph sets v to x; readGraph reads it.
func assignGraph(x float32) *tfpb.GraphDef {
	return GraphDef(sessionVar(), ConstF32("x", nil, x), NodeDef("assign", "AssignVariableOp", In("v", "x"), Attrs("dtype", wire.DTFloat)))
}

func readGraph() *tfpb.GraphDef {
	return GraphDef(sessionVar(), NodeDef("read", "ReadVariableOp", In("v"), Attrs("dtype", wire.DTFloat)))
}

// sessionRunner registers and runs graphs in sessions of one worker, each
// run a step of its own.
type sessionRunner struct {
	t    *testing.T
	w    *Worker
	step int64
}

func (r *sessionRunner) create(handle string, isolate bool) {
	r.t.Helper()
	if _, err := r.w.createWorkerSession(&tfpb.CreateWorkerSessionRequest{SessionHandle: handle, IsolateSessionState: isolate}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *sessionRunner) delete(handle string) {
	r.t.Helper()
	if _, err := r.w.deleteWorkerSession(&tfpb.DeleteWorkerSessionRequest{SessionHandle: handle}); err != nil {
		r.t.Fatal(err)
	}
}

// run registers g in session handle and runs it, fetching fetches.
func (r *sessionRunner) run(handle string, g *tfpb.GraphDef, fetches ...string) ([]wire.Tensor, error) {
	r.t.Helper()
	reg, err := r.w.registerGraph(&tfpb.RegisterGraphRequest{SessionHandle: handle, CreateWorkerSessionCalled: true, GraphDef: g})
	if err != nil {
		return nil, err
	}
	return r.runHandle(handle, reg.GetGraphHandle(), fetches...)
}

func (r *sessionRunner) runHandle(handle, graphHandle string, fetches ...string) ([]wire.Tensor, error) {
	r.step++
	req := &tfpb.RunGraphRequest{SessionHandle: handle, CreateWorkerSessionCalled: true, GraphHandle: graphHandle, StepId: r.step, RecvKey: fetches}
	_, out, err := r.w.runGraph(context.Background(), req, nil)
	r.w.rendezvous.Cleanup(r.step, errStepCleaned)
	r.t.Cleanup(func() {
		for i := range out {
			out[i].Buf.Release()
		}
	})
	return out, err
}

// read returns v as session handle sees it.
func (r *sessionRunner) read(handle string) (float32, error) {
	r.t.Helper()
	out, err := r.run(handle, readGraph(), "read")
	if err != nil {
		return 0, err
	}
	return Floats(&out[0])[0], nil
}

func (r *sessionRunner) assign(handle string, x float32) {
	r.t.Helper()
	if _, err := r.run(handle, assignGraph(x)); err != nil {
		r.t.Fatalf("assign %v in %s: %v", x, handle, err)
	}
}

func (r *sessionRunner) wantValue(handle string, want float32) {
	r.t.Helper()
	got, err := r.read(handle)
	if err != nil || got != want {
		r.t.Fatalf("v in session %s = %v, %v; want %v", handle, got, err, want)
	}
}

func TestIsolatedSessions(t *testing.T) {
	r := &sessionRunner{t: t, w: newTestWorker(t)}
	r.create("iso1", true)
	r.create("iso2", true)
	r.create("shared1", false)
	r.create("shared2", false)

	// Two isolated sessions name the same variable and see their own.
	r.assign("iso1", 1)
	r.assign("iso2", 2)
	r.wantValue("iso1", 1)
	r.wantValue("iso2", 2)
	// Sessions without isolation share the worker's, which the isolated
	// sessions' writes did not reach, and which reach no isolated one.
	if _, err := r.read("shared1"); status.CodeOf(err) != wire.FailedPrecondition {
		t.Fatalf("v in shared1 before any shared assignment: err = %v, want FailedPrecondition (uninitialized)", err)
	}
	r.assign("shared1", 3)
	r.wantValue("shared2", 3)
	r.wantValue("iso1", 1)
	// A graph of no session at all runs against the shared state too.
	out, err := runLocal(t, r.w, readGraph(), nil, "read")
	if err != nil || Floats(&out[0])[0] != 3 {
		t.Fatalf("v outside sessions = %v, %v; want 3", out, err)
	}

	// Deleting an isolated session drops its variables and graphs.
	r.w.mu.Lock()
	iso1 := r.w.sessions["iso1"]
	r.w.mu.Unlock()
	reg, err := r.w.registerGraph(&tfpb.RegisterGraphRequest{SessionHandle: "iso1", CreateWorkerSessionCalled: true, GraphDef: readGraph()})
	if err != nil {
		t.Fatal(err)
	}
	r.delete("iso1")
	if _, err := r.runHandle("iso1", reg.GetGraphHandle(), "read"); status.CodeOf(err) != wire.Aborted {
		t.Fatalf("RunGraph in a deleted session: err = %v, want Aborted", err)
	}
	g, err := graph.Build(readGraph(), iso1.env)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = g.Run(context.Background(), &tfpb.RunGraphRequest{StepId: 1000, RecvKey: []string{"read"}}, nil, false)
	r.w.rendezvous.Cleanup(1000, errStepCleaned)
	if status.CodeOf(err) != wire.FailedPrecondition {
		t.Fatalf("v of the deleted session: err = %v, want FailedPrecondition: its variables were kept", err)
	}
	// A session created again under the handle starts empty; the others
	// are untouched.
	r.create("iso1", true)
	if _, err := r.read("iso1"); status.CodeOf(err) != wire.FailedPrecondition {
		t.Fatalf("v in a new session iso1: err = %v, want FailedPrecondition", err)
	}
	r.wantValue("iso2", 2)
	r.wantValue("shared1", 3)

	// Deleting a shared session leaves the shared variables, which other
	// sessions and replicas still use; CleanupAll clears them, not the
	// isolated sessions'.
	r.delete("shared1")
	r.wantValue("shared2", 3)
	r.w.cleanupAll(&tfpb.CleanupAllRequest{})
	if _, err := r.read("shared2"); status.CodeOf(err) != wire.FailedPrecondition {
		t.Fatalf("v in shared2 after CleanupAll: err = %v, want FailedPrecondition", err)
	}
	r.wantValue("iso2", 2)
}

// TestCreateSessionTwiceKeepsState: a master retrying CreateWorkerSession
// must not lose an isolated session's variables.
func TestCreateSessionTwiceKeepsState(t *testing.T) {
	r := &sessionRunner{t: t, w: newTestWorker(t)}
	r.create("iso", true)
	r.assign("iso", 5)
	r.create("iso", true)
	r.wantValue("iso", 5)
}

// TestSessionCluster: a CreateWorkerSession carrying a ServerDef hands its
// cluster to Options.Cluster, whose error fails the call with
// FailedPrecondition and creates no session; one without a ServerDef
// does not call it.
func TestSessionCluster(t *testing.T) {
	var got []*tfpb.ClusterDef
	var fail error
	w, err := NewWorker(Options{Job: "worker", Cluster: func(c *tfpb.ClusterDef) error {
		got = append(got, c)
		return fail
	}})
	if err != nil {
		t.Fatal(err)
	}
	def := &tfpb.ServerDef{Cluster: &tfpb.ClusterDef{Job: []*tfpb.JobDef{{Name: "ps", Tasks: map[int32]string{0: "127.0.0.1:5"}}}}}
	if _, err := w.createWorkerSession(&tfpb.CreateWorkerSessionRequest{SessionHandle: "a"}); err != nil || len(got) != 0 {
		t.Fatalf("without a ServerDef: %v, %d calls of Cluster; want none", err, len(got))
	}
	if _, err := w.createWorkerSession(&tfpb.CreateWorkerSessionRequest{SessionHandle: "b", ServerDef: def}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].GetJob()[0].GetTasks()[0] != "127.0.0.1:5" {
		t.Fatalf("Cluster got %v, want the ServerDef's cluster", got)
	}
	fail = errors.New("no such peer")
	_, err = w.createWorkerSession(&tfpb.CreateWorkerSessionRequest{SessionHandle: "c", ServerDef: def})
	if status.CodeOf(err) != wire.FailedPrecondition {
		t.Fatalf("a failing Cluster: %v, want FailedPrecondition", err)
	}
	if err := w.checkSession("c", true); err == nil {
		t.Error("a session was created although Cluster failed")
	}
}
