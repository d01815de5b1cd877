package handlers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/wire/tfpb"
)

// The requests a real TensorFlow 2.21 master (tf.compat.v1,
// MonitoredTrainingSession over replica_device_setter, two ps) sent to
// ps task 0 of starwire, recorded by `serve --record_dir`
// (interop/tf/test_record.py writes them again): its session, its graph
// partitions (global_step's initializer under a tf.cond, the Saver's, the
// train op's) and the RunGraph and RecvTensor calls of the steps that
// initialize and save the variables.

// replay sends the recorded requests of dir to w's gRPC service in the
// order they came and fails on the first error. RegisterGraph's handles
// are the worker's own, given in the same order as when recorded, so the
// RunGraph requests name them unchanged. A graph that receives tensors
// from another task is registered but not run (the recording holds no
// other task's answers), nor are that step's RecvTensor calls; replay
// returns how many steps it ran.
func replay(t *testing.T, w *Worker, dir string) (ran int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.pb"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded requests in %s: %v", dir, err)
	}
	g := w.GRPCService()
	graphs := 0
	remote := map[string]bool{} // handles of graphs with remote _Recv
	skipped := map[int64]bool{} // steps not run
	for _, f := range files {
		method := strings.TrimSuffix(filepath.Base(f)[6:], ".pb")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		switch method {
		case "RegisterGraph":
			graphs++
			if recvsFromOthers(must(b, &tfpb.RegisterGraphRequest{}).GetGraphDef(), w.Task()) {
				remote["g"+strconv.Itoa(graphs)] = true
			}
		case "RunGraph":
			req := must(b, &tfpb.RunGraphRequest{})
			if remote[req.GetGraphHandle()] {
				skipped[req.GetStepId()] = true
				continue
			}
			ran++
		case "RecvTensor":
			if skipped[must(b, &tfpb.RecvTensorRequest{}).GetStepId()] {
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = replayOne(ctx, g, method, b)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
	}
	return ran
}

// recvsFromOthers reports whether def has a _Recv whose sender is not task.
func recvsFromOthers(def *tfpb.GraphDef, task string) bool {
	for _, n := range def.GetNode() {
		if (n.GetOp() == "_Recv" || n.GetOp() == "_HostRecv") && !strings.HasPrefix(string(n.GetAttr()["send_device"].GetS()), task+"/") {
			return true
		}
	}
	return false
}

// noPeers is a Resolver for replays: the graphs it lets register never run.
func noPeers(task string) (Caller, error) {
	return nil, fmt.Errorf("replay: no peer %s", task)
}

func replayOne(ctx context.Context, g tfpb.WorkerServiceServer, method string, b []byte) error {
	var err error
	switch method {
	case "GetStatus":
		_, err = g.GetStatus(ctx, must(b, &tfpb.GetStatusRequest{}))
	case "CreateWorkerSession":
		_, err = g.CreateWorkerSession(ctx, must(b, &tfpb.CreateWorkerSessionRequest{}))
	case "RegisterGraph":
		_, err = g.RegisterGraph(ctx, must(b, &tfpb.RegisterGraphRequest{}))
	case "RunGraph":
		var resp *tfpb.RunGraphResponse
		resp, err = g.RunGraph(ctx, must(b, &tfpb.RunGraphRequest{}))
		if err == nil && resp.GetStatusCode() != 0 {
			err = fmt.Errorf("RunGraph answered %v: %s", resp.GetStatusCode(), resp.GetStatusErrorMessage())
		}
	case "RecvTensor":
		_, err = g.RecvTensor(ctx, must(b, &tfpb.RecvTensorRequest{}))
	case "CleanupGraph":
		_, err = g.CleanupGraph(ctx, must(b, &tfpb.CleanupGraphRequest{}))
	case "DeleteWorkerSession":
		_, err = g.DeleteWorkerSession(ctx, must(b, &tfpb.DeleteWorkerSessionRequest{}))
	default:
		err = fmt.Errorf("no replay for method %s", method)
	}
	return err
}

// recordedIncarnation is the recording task's incarnation, as the first
// RecvTensor key of dir that the task sent names it: the keys TensorFlow
// built from it must match the replaying worker's.
func recordedIncarnation(t *testing.T, dir string) uint64 {
	files, _ := filepath.Glob(filepath.Join(dir, "*-RecvTensor.pb"))
	if len(files) == 0 {
		t.Fatalf("no RecvTensor in %s", dir)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(must(b, &tfpb.RecvTensorRequest{}).GetRendezvousKey(), ";")
	inc, err := strconv.ParseUint(parts[1], 16, 64)
	if len(parts) != 5 || err != nil {
		t.Fatalf("recorded key %q: %v", parts, err)
	}
	return inc
}

// must unmarshals b into m, which it returns; a recorded file that does
// not parse fails the replay through the call's own checks (an empty
// request).
func must[M proto.Message](b []byte, m M) M {
	if err := proto.Unmarshal(b, m); err != nil {
		panic(fmt.Sprintf("recorded request does not parse: %v", err))
	}
	return m
}

// TestReplayTF1InitAndSave replays what TensorFlow's master sent ps 0 to
// initialize the model (global_step's cond: Switch, Merge and the
// deadness of the branch not taken) and save it, then checks the
// variables it owns exist and are initialized.
func TestReplayTF1InitAndSave(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWorker(Options{Job: "ps", Task: 0, CheckpointDir: dir, Resolver: noPeers, Incarnation: recordedIncarnation(t, "testdata/tf1-ps0")})
	if err != nil {
		t.Fatal(err)
	}
	// Five partitions came; global_step's cond and the Saver's, which
	// take a tensor from the worker, are the ones not run.
	if ran := replay(t, w, "testdata/tf1-ps0"); ran != 3 {
		t.Errorf("replay ran %d steps, want 3", ran)
	}
}
