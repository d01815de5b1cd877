package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

const (
	psTask     = "/job:ps/replica:0/task:0"
	workerTask = "/job:worker/replica:0/task:0"
	psDev      = psTask + "/device:CPU:0"
	workerDev  = workerTask + "/device:CPU:0"
	clientInc  = 7
)

// testCluster is a ps and a worker task, each served over starwire and
// gRPC, reaching each other over protocol.
type testCluster struct {
	protocol string
	star     map[string]string // task -> starwire address
	grpc     map[string]string // task -> gRPC address

	mu     sync.Mutex
	peers  map[string]Caller
	closed bool // the test ended: resolve makes no Caller its cleanup would miss
}

func newTestCluster(t testing.TB, protocol string) *testCluster {
	t.Helper()
	tc := &testCluster{protocol: protocol, star: map[string]string{}, grpc: map[string]string{}, peers: map[string]Caller{}}
	for _, task := range []struct {
		job string
	}{{"ps"}, {"worker"}} {
		w, err := handlers.NewWorker(handlers.Options{Job: task.job, Resolver: tc.resolve})
		if err != nil {
			t.Fatal(err)
		}
		srv := rpc.NewServer()
		w.Register(srv)
		l, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(l)
		gl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gs := grpc.NewServer()
		tfpb.RegisterWorkerServiceServer(gs, w.GRPCService())
		go gs.Serve(gl)
		t.Cleanup(func() { srv.Close(); gs.Stop() })
		tc.star[w.Task()] = l.Addr().String()
		tc.grpc[w.Task()] = gl.Addr().String()
	}
	t.Cleanup(func() {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		tc.closed = true
		for _, c := range tc.peers {
			c.Close()
		}
	})
	return tc
}

// caller returns a new Caller of task over the cluster's protocol.
func (tc *testCluster) caller(t testing.TB, task string) Caller {
	if tc.protocol == "grpc" {
		c, err := handlers.DialGRPC(task, tc.grpc[task])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return handlers.NewStarCaller(task, rpc.NewClient(tc.star[task], rpc.ClientOptions{Transport: &tcp.Transport{}, Name: task}))
}

func (tc *testCluster) resolve(task string) (handlers.Caller, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if c, ok := tc.peers[task]; ok {
		return c, nil
	}
	// A task's handler still running as the test ends (a cleanup, a
	// transfer) may resolve a peer after the Callers were closed: a gRPC
	// client made then went on connecting after the tests, and the
	// package failed its leak check.
	if tc.closed {
		return nil, fmt.Errorf("no task %s: the test cluster is closed", task)
	}
	if _, ok := tc.star[task]; !ok {
		return nil, fmt.Errorf("no task %s", task)
	}
	var c Caller
	if tc.protocol == "grpc" {
		gc, err := handlers.DialGRPC(task, tc.grpc[task])
		if err != nil {
			return nil, err
		}
		c = gc
	} else {
		c = handlers.NewStarCaller(task, rpc.NewClient(tc.star[task], rpc.ClientOptions{Transport: &tcp.Transport{}, Name: task}))
	}
	tc.peers[task] = c
	return c, nil
}

func (tc *testCluster) driver(t testing.TB) *Driver {
	d := New(fmt.Sprintf("session-%s-%d", tc.protocol, time.Now().UnixNano()), tc.caller(t, psTask), tc.caller(t, workerTask))
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}

func floats(vals ...float32) wire.Tensor {
	b := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		b = append(b, tensor.Bytes([]float32{v})...)
	}
	return wire.Tensor{DType: wire.DTFloat, Shape: []int64{int64(len(vals))}, Data: b}
}

// TestTwoPartitionStep runs a step across two tasks: the ps takes a feed
// and sends it on; the worker pulls it with RecvTensor and returns it as a
// fetch. Over both protocols, with several steps in flight at once.
func TestTwoPartitionStep(t *testing.T) {
	for _, protocol := range []string{"grpc+seastar", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tc := newTestCluster(t, protocol)
			d := tc.driver(t)
			statuses, err := d.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			psInc := statuses[psTask].GetDeviceAttributes()[0].GetIncarnation()
			if psInc == 0 {
				t.Fatalf("GetStatus of the ps gave no incarnation: %v", statuses[psTask])
			}
			if err := d.CreateSessions(ctx, nil); err != nil {
				t.Fatal(err)
			}
			psGraph, err := d.RegisterGraph(ctx, psTask, &tfpb.GraphDef{Node: []*tfpb.NodeDef{
				recvNode("x", "x:0", workerDev, clientInc, psDev, wire.DTFloat, true),
				identityNode("y", "x", wire.DTFloat),
				sendNode("y/_send", "y", "y:0", psDev, psInc, workerDev, wire.DTFloat, false),
			}})
			if err != nil {
				t.Fatal(err)
			}
			wGraph, err := d.RegisterGraph(ctx, workerTask, &tfpb.GraphDef{Node: []*tfpb.NodeDef{
				recvNode("y/_recv", "y:0", psDev, psInc, workerDev, wire.DTFloat, false),
				identityNode("z", "y/_recv", wire.DTFloat),
				sendNode("z/_send", "z", "z:0", workerDev, 1, workerDev, wire.DTFloat, true),
			}})
			if err != nil {
				t.Fatal(err)
			}
			feedKey := key(workerDev, clientInc, psDev, "x:0")
			fetchKey := key(workerDev, 1, workerDev, "z:0")
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for step := range int64(8) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					want := floats(float32(step), 2, 3)
					var out handlers.Fetched
					defer out.Release()
					err := d.RunPartitions(ctx, 100+step,
						Partition{Graph: psGraph, Feeds: []handlers.Feed{{Key: feedKey, Tensor: want}}},
						Partition{Graph: wGraph, Fetches: []string{fetchKey}, Out: &out})
					if err == nil {
						err = d.CleanupStep(ctx, 100+step, psTask, workerTask)
					}
					if err != nil {
						errs <- err
						return
					}
					got, ok := out.Lookup(fetchKey)
					if !ok || got.DType != wire.DTFloat || !slices.Equal(got.Shape, want.Shape) || string(got.Data) != string(want.Data) {
						errs <- fmt.Errorf("step %d fetched %+v (found %v), want %+v", step, got, ok, want)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			st := d.Stats()
			// GetStatus ×2, CreateWorkerSession ×2, RegisterGraph ×2, then
			// per step RunGraph ×2 and CleanupGraph ×2.
			if want := int64(6 + 8*4); st.Calls != want {
				t.Errorf("driver made %d calls, want %d", st.Calls, want)
			}
			if st.Bytes < 8*12 {
				t.Errorf("driver moved %d bytes, want at least the %d fed", st.Bytes, 8*12)
			}
			if err := d.Close(ctx); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

// TestStepFailureCancelsPeers checks that a partition that fails does not
// leave its peer partition waiting for a tensor that never comes.
func TestStepFailureCancelsPeers(t *testing.T) {
	for _, protocol := range []string{"grpc+seastar", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tc := newTestCluster(t, protocol)
			d := tc.driver(t)
			statuses, err := d.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			psInc := statuses[psTask].GetDeviceAttributes()[0].GetIncarnation()
			if err := d.CreateSessions(ctx, nil); err != nil {
				t.Fatal(err)
			}
			wGraph, err := d.RegisterGraph(ctx, workerTask, &tfpb.GraphDef{Node: []*tfpb.NodeDef{
				recvNode("y/_recv", "y:0", psDev, psInc, workerDev, wire.DTFloat, false),
				sendNode("y/_send", "y/_recv", "y:0", workerDev, 1, workerDev, wire.DTFloat, true),
			}})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = d.RunPartitions(ctx, 1,
				Partition{Graph: Graph{Task: psTask, Handle: "no-such-graph"}},
				Partition{Graph: wGraph, Fetches: []string{key(workerDev, 1, workerDev, "y:0")}})
			if err == nil {
				t.Fatal("a step with an unknown graph succeeded")
			}
			if !errors.Is(err, status.ErrNotFound) && !errors.Is(err, status.ErrInvalidArgument) && !errors.Is(err, status.ErrAborted) {
				t.Logf("error (code %v): %v", status.CodeOf(err), err)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("the failed step took %v: its peer partition was not cancelled", time.Since(start))
			}
			d.CleanupStep(ctx, 1, psTask, workerTask)
		})
	}
}

// TestUnknownTask checks the error for a task without a Caller.
func TestUnknownTask(t *testing.T) {
	d := New("s")
	if _, err := d.RegisterGraph(context.Background(), "/job:ps/replica:0/task:9", &tfpb.GraphDef{}); !errors.Is(err, ErrUnknownTask) {
		t.Errorf("RegisterGraph on an unknown task: %v, want ErrUnknownTask", err)
	}
}

func TestParseTask(t *testing.T) {
	for _, tc := range []struct {
		in   string
		job  string
		idx  int
		good bool
	}{
		{"/job:ps/replica:0/task:3", "ps", 3, true},
		{"/job:worker/replica:0/task:0", "worker", 0, true},
		{"/job:ps/task:3", "", 0, false},
		{"ps:3", "", 0, false},
		{"/job:ps/replica:0/task:x", "", 0, false},
	} {
		job, idx, ok := parseTask(tc.in)
		if ok != tc.good || (ok && (job != tc.job || idx != tc.idx)) {
			t.Errorf("parseTask(%q) = %q, %d, %v", tc.in, job, idx, ok)
		}
	}
}
