package graph

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/starwire/starwire/handlers/compute"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// A step is one execution of a graph.
type step struct {
	g      *Graph
	id     int64
	handle string // the graph's handle, for messages
	ctx    context.Context
	cancel context.CancelCauseFunc
	feeds  map[string]wire.Tensor

	statsMu sync.Mutex            // async nodes finish concurrently
	stats   []*tfpb.NodeExecStats // when recording

	*stepScratch
}

// stepScratch is the memory a step of a graph works in: every node's
// inputs, outputs and kernel context, and the executor's bookkeeping. A
// step's arrays are as large as its graph, and a graph runs every step of
// a job, so they are kept from one step to the next instead of allocated
// (and collected) each time.
type stepScratch struct {
	vals    []ops.Value   // every node's outputs, at Graph.outOff
	ins     []ops.Value   // every node's inputs, at Graph.inOff
	ctxs    []ops.Context // by node id
	pending []int
	ready   []int
	done    chan asyncDone
	// dead marks, by node id, the nodes a dead tensor reached and the
	// executor skipped: their control edges carry deadness on.
	dead []bool
}

func (g *Graph) getScratch() *stepScratch {
	if sc, ok := g.scratch.Get().(*stepScratch); ok {
		return sc
	}
	return &stepScratch{
		vals: make([]ops.Value, g.numOuts), ins: make([]ops.Value, g.numIns), ctxs: make([]ops.Context, len(g.nodes)),
		pending: make([]int, len(g.nodes)), ready: make([]int, 0, len(g.nodes)), done: make(chan asyncDone, len(g.nodes)),
		dead: make([]bool, len(g.nodes)),
	}
}

// putScratch keeps sc for another step once the step that used it has
// ended: its nodes have all returned (execute waits for them) and its
// outputs have been released, so nothing refers to sc's contents but sc.
// They are cleared, so that a kept scratch holds no tensor or context.
func (g *Graph) putScratch(sc *stepScratch) {
	clear(sc.vals)
	clear(sc.ins)
	clear(sc.ctxs)
	clear(sc.dead)
	g.scratch.Put(sc)
}

// Run runs one step of g, as RunGraph asks: feeds[i] is the tensor of
// req.Send[i], and Run does not take the caller's references. It returns
// the tensors of req.RecvKey, in order, each owning a reference, and, when
// record is set, every node's timing. The first failing node aborts the
// step (see execute); the step's rendezvous state stays until the caller
// cleans the step up.
func (g *Graph) Run(ctx context.Context, req *tfpb.RunGraphRequest, feeds []wire.Tensor, record bool) ([]wire.Tensor, []*tfpb.NodeExecStats, error) {
	if len(feeds) != len(req.GetSend()) {
		return nil, nil, status.Errorf(wire.InvalidArgument, "RunGraph: %d tensors for %d sends", len(feeds), len(req.GetSend()))
	}
	feeds = ownFeeds(feeds)
	defer tensor.ReleaseAll(feeds)
	sc := g.getScratch()
	defer g.putScratch(sc)
	s := &step{g: g, id: req.GetStepId(), handle: req.GetGraphHandle(), stepScratch: sc}
	var stop func()
	s.ctx, s.cancel, stop = stepContext(ctx)
	defer stop()
	keyed, err := s.checkFeeds(req, feeds)
	if err != nil {
		return nil, nil, err
	}
	if err := s.checkFetches(req.GetRecvKey()); err != nil {
		return nil, nil, err
	}
	rv := g.env.Rendezvous
	rv.Open(s.id)
	for i, k := range keyed {
		if k == "" {
			continue
		}
		if err := rv.Send(s.id, k, tensor.Ref(feeds[i])); err != nil {
			return nil, nil, fmt.Errorf("RunGraph: feed %q: %w", k, err)
		}
	}
	if record {
		s.stats = make([]*tfpb.NodeExecStats, 0, len(g.nodes))
	}
	err = s.execute()
	defer s.release()
	if err != nil {
		return nil, nil, err
	}
	fetches := make([]wire.Tensor, 0, len(req.GetRecvKey()))
	for _, k := range req.GetRecvKey() {
		t, err := s.fetch(k)
		if err != nil {
			tensor.ReleaseAll(fetches)
			return nil, nil, err
		}
		fetches = append(fetches, t)
	}
	return fetches, s.stats, nil
}

// ownFeeds returns the feeds as tensors the step may keep past the call
// (in its rendezvous, or sent on to another task): each with a reference of
// its own and a shape of its own, since a received frame's shapes are
// reused once the call ends. Memory without a Buf is copied.
func ownFeeds(feeds []wire.Tensor) []wire.Tensor {
	owned := make([]wire.Tensor, len(feeds))
	for i := range feeds {
		t := &feeds[i]
		if t.Buf == nil && len(t.Data) > 0 {
			owned[i] = tensor.Copy(t)
			continue
		}
		owned[i] = tensor.Ref(*t)
		owned[i].Shape = append([]int64(nil), t.Shape...)
	}
	return owned
}

// checkFeeds matches every send to a feed node and checks its dtype and
// shape, before anything reaches the rendezvous. It returns the rendezvous
// key of each send ("" for a named feed) and fills s.feeds.
func (s *step) checkFeeds(req *tfpb.RunGraphRequest, feeds []wire.Tensor) ([]string, error) {
	keys := make([]string, len(feeds))
	for i, nt := range req.GetSend() {
		name := nt.GetName()
		t := &feeds[i]
		n := s.g.feedRecvs[name]
		if n != nil {
			keys[i] = name
		} else if n = s.g.namedFeeds[strings.TrimSuffix(name, ":0")]; n == nil {
			return nil, status.Errorf(wire.InvalidArgument, "RunGraph: send %q feeds no client-terminated _Recv, Placeholder or _Arg of graph %s", name, s.handle)
		}
		if err := t.Check(); err != nil {
			return nil, status.Errorf(wire.InvalidArgument, "RunGraph: send %q: %v", name, err)
		}
		if t.DType != n.FeedType {
			return nil, status.Errorf(wire.InvalidArgument, "RunGraph: send %q is %v, node %q takes %v", name, t.DType, n.Name, n.FeedType)
		}
		if !shapeFits(t.Shape, n.FeedShape) {
			return nil, status.Errorf(wire.InvalidArgument, "RunGraph: send %q has shape %v, node %q takes %v", name, t.Shape, n.Name, n.FeedShape)
		}
		if !tensor.Aligned(t) {
			return nil, status.Errorf(wire.InvalidArgument, "RunGraph: send %q: data not aligned for %v", name, t.DType)
		}
		if keys[i] == "" {
			if s.feeds == nil {
				s.feeds = make(map[string]wire.Tensor)
			}
			s.feeds[n.Name] = *t
		}
	}
	for key, n := range s.g.feedRecvs {
		fed := false
		for _, k := range keys {
			fed = fed || k == key
		}
		if !fed {
			return nil, status.Errorf(wire.InvalidArgument, "RunGraph: client-terminated _Recv %q (key %q) is not fed", n.Name, key)
		}
	}
	return keys, nil
}

// shapeFits reports whether shape matches want, whose -1 dimensions match
// anything; a nil want matches every shape.
func shapeFits(shape, want []int64) bool {
	if want == nil {
		return true
	}
	if len(shape) != len(want) {
		return false
	}
	for i := range want {
		if want[i] >= 0 && want[i] != shape[i] {
			return false
		}
	}
	return true
}

// checkFetches checks that every recv_key names a client-terminated _Send
// or a node output.
func (s *step) checkFetches(keys []string) error {
	for _, k := range keys {
		if s.g.fetchSends[k] != nil {
			continue
		}
		n, port, ok := s.g.output(k)
		if !ok {
			return status.Errorf(wire.InvalidArgument, "RunGraph: recv_key %q is no client-terminated _Send nor node output of graph %s", k, s.handle)
		}
		if port >= n.NumOutputs && !(n.Op == "_Retval" && port == 0) {
			return status.Errorf(wire.InvalidArgument, "RunGraph: recv_key %q: %s has %d outputs", k, n.Op, n.NumOutputs)
		}
	}
	return nil
}

// output resolves "node" or "node:i".
func (g *Graph) output(name string) (*node, int, bool) {
	if n := g.byName[name]; n != nil {
		return n, 0, true
	}
	i := strings.LastIndexByte(name, ':')
	if i < 0 {
		return nil, 0, false
	}
	port, err := strconv.Atoi(name[i+1:])
	n := g.byName[name[:i]]
	if err != nil || n == nil || port < 0 {
		return nil, 0, false
	}
	return n, port, true
}

// fetch returns the tensor of recv_key k, with a reference of its own.
func (s *step) fetch(k string) (wire.Tensor, error) {
	if s.g.fetchSends[k] != nil {
		t, _, err := s.g.env.Rendezvous.Recv(s.ctx, s.id, k)
		if err != nil {
			return wire.Tensor{}, fmt.Errorf("RunGraph: fetch %q: %w", k, err)
		}
		return t, nil
	}
	n, port, _ := s.g.output(k)
	if n.Op == "_Retval" {
		n, port = s.g.nodes[n.inputs[0].node], n.inputs[0].port
	}
	v := &s.outputs(n)[port]
	switch {
	case v.IsResource():
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "RunGraph: fetch %q is a resource handle", k)
	case !v.Set:
		return wire.Tensor{}, status.Errorf(wire.Internal, "RunGraph: fetch %q was not computed", k)
	}
	return v.Read()
}

// outputs returns n's outputs in this step.
func (s *step) outputs(n *node) []ops.Value {
	off := s.g.outOff[n.id]
	return s.vals[off : off+n.NumOutputs : off+n.NumOutputs]
}

// release drops the step's outputs.
func (s *step) release() {
	for i := range s.vals {
		s.vals[i].T.Buf.Release()
		s.vals[i] = ops.Value{}
	}
}

// asyncDone reports an asynchronous node's end to the executor.
type asyncDone struct {
	n   *node
	err error
}

// execute runs the step's nodes in dataflow order. Nodes that may wait
// (a _Recv from another task or another node) run on goroutines of their
// own, everything else on the calling goroutine; a node runs once all its
// inputs are done. The first error aborts the step: its rendezvous fails
// every waiter, the context of remote receives is cancelled, no further
// node starts, and execute returns once the nodes running have ended.
func (s *step) execute() error {
	g := s.g
	pending := s.pending
	copy(pending, g.pending)
	ready := append(s.ready[:0], g.roots...)
	done := s.done
	running := 0
	var first error
	tok := token{l: g.env.Compute}
	defer tok.drop()
	finish := func(n *node, err error) {
		if err != nil {
			if first == nil {
				first = fmt.Errorf("node %q (%s): %w", n.Name, n.Op, err)
				if status.CodeOf(err) == wire.Unknown {
					first = status.Errorf(wire.Internal, "%v", first)
				}
				s.cancel(first)
				s.g.env.Rendezvous.Abort(s.id, first)
			}
			return
		}
		for _, o := range n.outs {
			if pending[o]--; pending[o] == 0 {
				ready = append(ready, o)
			}
		}
	}
	for {
		if first == nil && len(ready) > 0 {
			n := g.nodes[ready[len(ready)-1]]
			ready = ready[:len(ready)-1]
			if n.spec.Async && !n.inline {
				running++
				goAsync(func() { done <- asyncDone{n, s.run(n)} })
				continue
			}
			if n.computes {
				tok.take()
			} else {
				tok.drop()
			}
			finish(n, s.run(n))
			continue
		}
		tok.drop()
		if running == 0 {
			break
		}
		d := <-done
		running--
		finish(d.n, d.err)
	}
	if first != nil {
		return first
	}
	return nil
}

// run gathers n's inputs and runs its kernel, unless a dead tensor
// reaches it, as TensorFlow's executor decides: a node is dead when one
// of its data inputs is dead or one of its control inputs was a dead
// node; a Merge (Spec.Merges) only when all its data inputs are. A dead
// node's kernel is skipped and its outputs are dead, except for _Send,
// which passes deadness on to its receiver.
func (s *step) run(n *node) error {
	var start time.Time
	if s.stats != nil {
		start = time.Now()
	}
	off := s.g.inOff[n.id]
	c := &s.ctxs[n.id]
	*c = ops.Context{Ctx: s.ctx, Step: s.id, Feeds: s.feeds, In: s.ins[off : off+len(n.inputs) : off+len(n.inputs)], Out: s.outputs(n)}
	deadIn, liveIn := -1, false
	for i, e := range n.inputs {
		c.In[i] = s.outputs(s.g.nodes[e.node])[e.port]
		if c.In[i].T.Dead {
			if deadIn < 0 {
				deadIn = i
			}
		} else {
			liveIn = true
		}
	}
	dead := deadIn >= 0
	if n.spec.Merges {
		dead = !liveIn
	} else {
		for _, ctl := range n.controls {
			dead = dead || s.dead[ctl]
		}
	}
	var err error
	switch {
	case !dead:
		err = c.Run(n.kernel)
	case n.Op == "_Send":
		if deadIn < 0 { // dead by a control input: what it sends is dead
			c.In[0] = ops.Value{T: wire.Tensor{DType: c.In[0].T.DType, Dead: true}, Set: true}
		}
		err = c.Run(n.kernel)
	default:
		s.dead[n.id] = true
		dt := wire.DTFloat
		if deadIn >= 0 {
			dt = c.In[deadIn].T.DType
		}
		for i := range c.Out {
			c.Out[i] = ops.Value{T: wire.Tensor{DType: dt, Dead: true}, Set: true}
		}
	}
	if s.stats != nil && err == nil {
		s.statsMu.Lock()
		end := time.Now()
		s.stats = append(s.stats, &tfpb.NodeExecStats{
			NodeName:        n.Name,
			AllStartMicros:  start.UnixMicro(),
			AllEndRelMicros: end.Sub(start).Microseconds(),
			OpEndRelMicros:  end.Sub(start).Microseconds(),
			TimelineLabel:   n.Name + " = " + n.Op + "()",
		})
		s.statsMu.Unlock()
	}
	return err
}

// A token is the executor's hold on a compute token: taken for a kernel
// that computes and kept through the ones that follow it on the executing
// goroutine, so that a run of kernels takes one token instead of one
// each; given back before a kernel that may write to the network and
// before the executor waits for an asynchronous node.
type token struct {
	l    *compute.Limit
	held bool
}

func (t *token) take() {
	if !t.held {
		t.l.Acquire()
		t.held = true
	}
}

func (t *token) drop() {
	if t.held {
		t.l.Release()
		t.held = false
	}
}
