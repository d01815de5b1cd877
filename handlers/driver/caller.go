package driver

import (
	"context"
	"sync/atomic"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// A Caller carries WorkerService calls to one task, a master's and a
// worker's alike: the master's typed methods, and handlers.Caller's Call,
// which a worker's calls to its peers take (a remote _Recv's RecvTensor,
// in starwire's encoding), so that a task's Resolver hands out the same
// Callers and their traffic is counted with the rest. The two
// implementations are StarCaller (starwire: protobuf metadata, tensors as
// raw segments) and GRPCCaller (gRPC: tensors inside TensorProto). No
// method changes the request it is given. Safe for concurrent use.
type Caller interface {
	handlers.Caller
	// Task returns the name of the task called, "/job:ps/replica:0/task:0".
	Task() string
	GetStatus(ctx context.Context) (*tfpb.GetStatusResponse, error)
	CreateWorkerSession(ctx context.Context, req *tfpb.CreateWorkerSessionRequest) error
	DeleteWorkerSession(ctx context.Context, req *tfpb.DeleteWorkerSessionRequest) error
	RegisterGraph(ctx context.Context, req *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error)
	DeregisterGraph(ctx context.Context, req *tfpb.DeregisterGraphRequest) error
	// RunGraph runs req with feeds as its send entries (req.Send must be
	// empty) and places the tensors fetched for req.RecvKey in out, in
	// that order.
	RunGraph(ctx context.Context, req *tfpb.RunGraphRequest, feeds []Feed, out *Fetched) error
	CleanupGraph(ctx context.Context, req *tfpb.CleanupGraphRequest) error
	// RecvTensor fetches one rendezvous key's tensor into out.
	RecvTensor(ctx context.Context, req *tfpb.RecvTensorRequest, out *Fetched) error
	// Stats returns the calls made so far and the bytes they moved.
	Stats() Stats
	Close() error
}

// A Feed is a tensor for a client-terminated _Recv. The tensor's memory
// must stay unchanged until the RunGraph call returns; the caller keeps
// ownership of its Buf.
type Feed struct {
	Key    string
	Tensor wire.Tensor
}

// Fetched holds the tensors a call returned, in the order asked for. They
// are valid until Release; a tensor's Buf, when set, is owned by Fetched.
// A Fetched can be reused after Release.
type Fetched struct {
	Keys    []string
	Tensors []wire.Tensor
	release func()
}

// Release returns the fetched tensors' memory.
func (f *Fetched) Release() {
	if f.release != nil {
		f.release()
		f.release = nil
	}
	clear(f.Tensors)
	f.Keys, f.Tensors = f.Keys[:0], f.Tensors[:0]
}

// Lookup returns the fetched tensor of key.
func (f *Fetched) Lookup(key string) (*wire.Tensor, bool) {
	for i, k := range f.Keys {
		if k == key {
			return &f.Tensors[i], true
		}
	}
	return nil, false
}

// Stats count a Caller's calls and the bytes they moved, both ways: the
// messages' metadata and tensor bytes (TensorProto bytes for gRPC), not
// transport framing.
type Stats struct {
	Calls int64
	Bytes int64
}

// Add returns the sum of s and o.
func (s Stats) Add(o Stats) Stats { return Stats{Calls: s.Calls + o.Calls, Bytes: s.Bytes + o.Bytes} }

// counter is a Stats updated concurrently.
type counter struct{ calls, bytes atomic.Int64 }

func (c *counter) add(bytes int) {
	c.calls.Add(1)
	c.bytes.Add(int64(bytes))
}

func (c *counter) stats() Stats { return Stats{Calls: c.calls.Load(), Bytes: c.bytes.Load()} }
