package tasks

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
)

// A PathCount is what one path carried of a task's calls to its peers.
type PathCount struct {
	// Path is the path as the transport reported it per call
	// (rpc.ClientInfo.Path): netpath.TCP, AFXDP, UDP.
	Path         netpath.Path
	Calls, Bytes int64
}

// pathCounter counts a task's starwire calls to its peers by the path
// each took, from a client interceptor: the transport that carried a call
// names its path, so a dual connection's calls are counted where they
// went, not where the connection could send them. Safe for concurrent use.
type pathCounter struct {
	mu sync.Mutex
	n  []PathCount // few: one per path
}

// interceptor is an rpc.ClientInterceptor that counts each call that was
// answered.
func (p *pathCounter) interceptor(ctx context.Context, info *rpc.ClientInfo, req *rpc.Request, reply *rpc.Reply, invoke rpc.Invoker) error {
	err := invoke(ctx, info, req, reply)
	if err != nil || info.Path == "" {
		return err
	}
	bytes := len(req.Meta) + len(reply.Meta)
	for i := range req.Tensors {
		bytes += len(req.Tensors[i].Data)
	}
	for i := range reply.Tensors {
		bytes += len(reply.Tensors[i].Data)
	}
	p.add(info.Path, int64(bytes))
	return nil
}

func (p *pathCounter) add(path netpath.Path, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.n {
		if p.n[i].Path == path {
			p.n[i].Calls++
			p.n[i].Bytes += bytes
			return
		}
	}
	p.n = append(p.n, PathCount{Path: path, Calls: 1, Bytes: bytes})
}

// counts returns the counts, the path with the most calls first.
func (p *pathCounter) counts() []PathCount {
	p.mu.Lock()
	out := slices.Clone(p.n)
	p.mu.Unlock()
	slices.SortStableFunc(out, func(a, b PathCount) int { return cmp.Compare(b.Calls, a.Calls) })
	return out
}
