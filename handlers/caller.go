package handlers

import (
	"context"
	"sync/atomic"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// A Caller makes starwire calls to one peer; *rpc.Client is one, and so
// are StarCaller and GRPCCaller, the WorkerService clients, which carry a
// master's typed calls and a worker's calls to its peers alike (a remote
// _Recv's RecvTensor, in the encoding of the package doc), so that a
// task's Resolver hands out the clients its master uses.
type Caller interface {
	Call(ctx context.Context, m rpc.Method, req *rpc.Request, resp *rpc.Reply) error
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

// Stats count a client's calls and the bytes they moved, both ways: the
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
