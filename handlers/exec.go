package handlers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// A value is one output of a node during a step: a tensor, owning one
// reference of its Buf, or a variable (a resource handle, or the ref output
// of VariableV2, which readers see as its current value).
type value struct {
	t     wire.Tensor
	v     *variable
	isRef bool // VariableV2's ref output: read v when used as a value
	set   bool
}

// A kernel computes one node's outputs from its inputs.
type kernel func(c *opCtx) error

// opCtx is what a kernel sees. Kernels never write into their inputs'
// memory: it may be a graph constant, a feed, or another node's output.
type opCtx struct {
	ctx  context.Context
	s    *step
	n    *node
	in   []value
	out  []value
	temp []wire.Tensor // tensors read from ref inputs, released after the kernel
}

// A step is one execution of a graph.
type step struct {
	w      *Worker
	g      *graph
	id     int64
	ctx    context.Context
	cancel context.CancelCauseFunc
	vals   []value // every node's outputs, at graph.outOff
	ins    []value // every node's inputs, at graph.inOff
	ctxs   []opCtx // by node id
	feeds  map[string]wire.Tensor
	stats  []*tfpb.NodeExecStats // when recording
}

// input returns input i as a tensor, reading a ref input's variable.
func (c *opCtx) input(i int) (*wire.Tensor, error) {
	in := &c.in[i]
	if in.isRef {
		t, err := in.v.read()
		if err != nil {
			return nil, err
		}
		c.temp = append(c.temp, t)
		return &c.temp[len(c.temp)-1], nil
	}
	if in.v != nil {
		return nil, rpc.Errorf(wire.InvalidArgument, "input %d is a resource handle, not a tensor", i)
	}
	return &in.t, nil
}

// typed returns input i after checking its dtype.
func (c *opCtx) typed(i int, want wire.DataType) (*wire.Tensor, error) {
	t, err := c.input(i)
	if err != nil {
		return nil, err
	}
	if t.DType != want {
		return nil, rpc.Errorf(wire.InvalidArgument, "input %d is %v, want %v", i, t.DType, want)
	}
	return t, nil
}

// inputs sets ts[i] to input i, as input returns it, for every i below
// len(ts), and stops at the first error. Kernels pass an array on their
// stack, so fetching several inputs costs no allocation.
func (c *opCtx) inputs(ts []*wire.Tensor) error {
	for i := range ts {
		var err error
		if ts[i], err = c.input(i); err != nil {
			return err
		}
	}
	return nil
}

// typedInputs is inputs for kernels whose first len(ts) inputs all have
// dtype want; each is checked, as typed does, before the next is read.
func (c *opCtx) typedInputs(want wire.DataType, ts []*wire.Tensor) error {
	for i := range ts {
		var err error
		if ts[i], err = c.typed(i, want); err != nil {
			return err
		}
	}
	return nil
}

// resource returns the variable input i refers to.
func (c *opCtx) resource(i int) (*variable, error) {
	if c.in[i].v == nil {
		return nil, rpc.Errorf(wire.InvalidArgument, "input %d is %v, not a variable", i, c.in[i].t.DType)
	}
	return c.in[i].v, nil
}

// variableAndInput returns the variable of input 0 and the tensor of input
// 1, the two inputs every op that writes or indexes one variable starts
// with.
func (c *opCtx) variableAndInput() (*variable, *wire.Tensor, error) {
	v, err := c.resource(0)
	if err != nil {
		return nil, nil, err
	}
	t, err := c.input(1)
	if err != nil {
		return nil, nil, err
	}
	return v, t, nil
}

// setOut makes t output i; the step takes over t.Buf.
func (c *opCtx) setOut(i int, t wire.Tensor) { c.out[i] = value{t: t, set: true} }

// forward makes output i share input i's tensor (a new reference).
func (c *opCtx) forward(out int, t *wire.Tensor) {
	c.setOut(out, refTensor(*t))
}

// refTensor returns t with one more reference on its Buf.
func refTensor(t wire.Tensor) wire.Tensor {
	if t.Buf != nil {
		t.Buf.Ref()
	}
	return t
}

// releaseTensors drops the references ts hold.
func releaseTensors(ts []wire.Tensor) {
	for i := range ts {
		ts[i].Buf.Release()
	}
}

// runGraph runs one step of a registered graph. feeds[i] is the tensor of
// req.Send[i]; runGraph does not take the callers' references. The
// returned tensors, one per req.RecvKey, each own a reference.
func (w *Worker) runGraph(ctx context.Context, req *tfpb.RunGraphRequest, feeds []wire.Tensor) (*tfpb.RunGraphResponse, []wire.Tensor, error) {
	resp, fetches, err := w.runGraphErr(ctx, req, feeds)
	if err != nil && req.GetStoreErrorsInResponseBody() {
		return &tfpb.RunGraphResponse{StatusCode: tfpb.Code(rpc.CodeOf(err)), StatusErrorMessage: err.Error()}, nil, nil
	}
	return resp, fetches, err
}

func (w *Worker) runGraphErr(ctx context.Context, req *tfpb.RunGraphRequest, feeds []wire.Tensor) (*tfpb.RunGraphResponse, []wire.Tensor, error) {
	if err := w.checkSession(req.GetSessionHandle(), req.GetCreateWorkerSessionCalled()); err != nil {
		return nil, nil, err
	}
	if req.GetIsPartial() {
		return nil, nil, rpc.Errorf(wire.Unimplemented, "RunGraph: partial runs are not supported")
	}
	g, err := w.lookupGraph(req.GetGraphHandle())
	if err != nil {
		return nil, nil, err
	}
	if len(feeds) != len(req.GetSend()) {
		return nil, nil, rpc.Errorf(wire.InvalidArgument, "RunGraph: %d tensors for %d sends", len(feeds), len(req.GetSend()))
	}
	feeds = ownFeeds(feeds)
	defer releaseTensors(feeds)
	s := &step{w: w, g: g, id: req.GetStepId(), vals: make([]value, g.numOuts), ins: make([]value, g.numIns), ctxs: make([]opCtx, len(g.nodes))}
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
	w.rendezvous.Open(s.id)
	for i, k := range keyed {
		if k == "" {
			continue
		}
		if err := w.rendezvous.Send(s.id, k, refTensor(feeds[i])); err != nil {
			return nil, nil, fmt.Errorf("RunGraph: feed %q: %w", k, err)
		}
	}
	recording := w.stats.recording() || req.GetExecOpts().GetRecordTimeline() || req.GetExecOpts().GetRecordCosts()
	if recording {
		s.stats = make([]*tfpb.NodeExecStats, 0, len(g.nodes))
	}
	err = s.execute()
	defer s.release()
	if err != nil {
		return nil, nil, err
	}
	resp := &tfpb.RunGraphResponse{Recv: make([]*tfpb.NamedTensorProto, len(req.GetRecvKey()))}
	fetches := make([]wire.Tensor, 0, len(req.GetRecvKey()))
	for i, k := range req.GetRecvKey() {
		resp.Recv[i] = &tfpb.NamedTensorProto{Name: k}
		t, err := s.fetch(k)
		if err != nil {
			releaseTensors(fetches)
			return nil, nil, err
		}
		fetches = append(fetches, t)
	}
	if recording {
		st := &tfpb.StepStats{DevStats: []*tfpb.DeviceStepStats{{Device: w.attrs.Name, NodeStats: s.stats}}}
		w.stats.record(s.id, st)
		if req.GetExecOpts().GetRecordTimeline() || req.GetExecOpts().GetRecordCosts() {
			resp.StepStats = st
		}
	}
	return resp, fetches, nil
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
			owned[i] = copyTensor(t)
			continue
		}
		owned[i] = refTensor(*t)
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
			return nil, rpc.Errorf(wire.InvalidArgument, "RunGraph: send %q feeds no client-terminated _Recv, Placeholder or _Arg of graph %s", name, s.g.handle)
		}
		if err := t.Check(); err != nil {
			return nil, rpc.Errorf(wire.InvalidArgument, "RunGraph: send %q: %v", name, err)
		}
		if t.DType != n.feedType {
			return nil, rpc.Errorf(wire.InvalidArgument, "RunGraph: send %q is %v, node %q takes %v", name, t.DType, n.name, n.feedType)
		}
		if !shapeFits(t.Shape, n.feedShape) {
			return nil, rpc.Errorf(wire.InvalidArgument, "RunGraph: send %q has shape %v, node %q takes %v", name, t.Shape, n.name, n.feedShape)
		}
		if !aligned(t) {
			return nil, rpc.Errorf(wire.InvalidArgument, "RunGraph: send %q: data not aligned for %v", name, t.DType)
		}
		if keys[i] == "" {
			if s.feeds == nil {
				s.feeds = make(map[string]wire.Tensor)
			}
			s.feeds[n.name] = *t
		}
	}
	for key, n := range s.g.feedRecvs {
		fed := false
		for _, k := range keys {
			fed = fed || k == key
		}
		if !fed {
			return nil, rpc.Errorf(wire.InvalidArgument, "RunGraph: client-terminated _Recv %q (key %q) is not fed", n.name, key)
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
			return rpc.Errorf(wire.InvalidArgument, "RunGraph: recv_key %q is no client-terminated _Send nor node output of graph %s", k, s.g.handle)
		}
		if port >= n.nouts && !(n.op == "_Retval" && port == 0) {
			return rpc.Errorf(wire.InvalidArgument, "RunGraph: recv_key %q: %s has %d outputs", k, n.op, n.nouts)
		}
	}
	return nil
}

// output resolves "node" or "node:i".
func (g *graph) output(name string) (*node, int, bool) {
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
		t, _, err := s.w.rendezvous.Recv(s.ctx, s.id, k)
		if err != nil {
			return wire.Tensor{}, fmt.Errorf("RunGraph: fetch %q: %w", k, err)
		}
		return t, nil
	}
	n, port, _ := s.g.output(k)
	if n.op == "_Retval" {
		n, port = s.g.nodes[n.inputs[0].node], n.inputs[0].port
	}
	v := s.outputs(n)[port]
	switch {
	case v.isRef:
		return v.v.read()
	case v.v != nil:
		return wire.Tensor{}, rpc.Errorf(wire.InvalidArgument, "RunGraph: fetch %q is a resource handle", k)
	case !v.set:
		return wire.Tensor{}, rpc.Errorf(wire.Internal, "RunGraph: fetch %q was not computed", k)
	}
	return refTensor(v.t), nil
}

// outputs returns n's outputs in this step.
func (s *step) outputs(n *node) []value {
	off := s.g.outOff[n.id]
	return s.vals[off : off+n.nouts : off+n.nouts]
}

// release drops the step's outputs.
func (s *step) release() {
	for i := range s.vals {
		s.vals[i].t.Buf.Release()
		s.vals[i] = value{}
	}
}

// asyncDone reports an asynchronous node's end to the executor.
type asyncDone struct {
	n   *node
	err error
}

// execute runs the step's nodes in dataflow order. Nodes that may wait
// (_Recv) run on goroutines of their own, everything else on the calling
// goroutine; a node runs once all its inputs are done. The first error
// aborts the step: its rendezvous fails every waiter, the context of
// remote receives is cancelled, no further node starts, and execute
// returns once the nodes running have ended.
func (s *step) execute() error {
	g := s.g
	pending := append([]int(nil), g.pending...)
	ready := append(make([]int, 0, len(g.nodes)), g.roots...)
	done := make(chan asyncDone, len(g.nodes))
	running := 0
	var first error
	finish := func(n *node, err error) {
		if err != nil {
			if first == nil {
				first = fmt.Errorf("node %q (%s): %w", n.name, n.op, err)
				if rpc.CodeOf(err) == wire.Unknown {
					first = rpc.Errorf(wire.Internal, "%v", first)
				}
				s.cancel(first)
				s.w.rendezvous.Abort(s.id, first)
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
			if n.spec.async {
				running++
				go func() { done <- asyncDone{n, s.run(n)} }()
				continue
			}
			finish(n, s.run(n))
			continue
		}
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

// run gathers n's inputs and runs its kernel. When a data input is dead,
// the kernel is skipped and every output is dead, except for _Send, which
// passes deadness on to its receiver.
func (s *step) run(n *node) error {
	var start time.Time
	if s.stats != nil {
		start = time.Now()
	}
	off := s.g.inOff[n.id]
	c := &s.ctxs[n.id]
	*c = opCtx{ctx: s.ctx, s: s, n: n, in: s.ins[off : off+len(n.inputs) : off+len(n.inputs)], out: s.outputs(n)}
	dead := false
	for i, e := range n.inputs {
		c.in[i] = s.outputs(s.g.nodes[e.node])[e.port]
		dead = dead || c.in[i].t.Dead
	}
	var err error
	if dead && n.op != "_Send" {
		dt := wire.DTFloat
		for _, in := range c.in {
			if in.t.Dead {
				dt = in.t.DType
				break
			}
		}
		for i := range c.out {
			c.out[i] = value{t: wire.Tensor{DType: dt, Dead: true}, set: true}
		}
	} else {
		err = n.kernel(c)
	}
	for i := range c.temp {
		c.temp[i].Buf.Release()
	}
	if s.stats != nil && err == nil {
		s.w.stats.mu.Lock() // also guards s.stats: async nodes finish concurrently
		end := time.Now()
		s.stats = append(s.stats, &tfpb.NodeExecStats{
			NodeName:        n.name,
			AllStartMicros:  start.UnixMicro(),
			AllEndRelMicros: end.Sub(start).Microseconds(),
			OpEndRelMicros:  end.Sub(start).Microseconds(),
			TimelineLabel:   n.name + " = " + n.op + "()",
		})
		s.w.stats.mu.Unlock()
	}
	return err
}

// decodeSends decodes the tensors a RunGraph request carries in its
// protobuf, as gRPC callers send them. On error it releases those it
// decoded.
func decodeSends(req *tfpb.RunGraphRequest) ([]wire.Tensor, error) {
	feeds := make([]wire.Tensor, len(req.GetSend()))
	for i, s := range req.GetSend() {
		t, err := TensorFromProto(s.GetTensor())
		if err != nil {
			releaseTensors(feeds[:i])
			return nil, rpc.Errorf(wire.InvalidArgument, "RunGraph: send %q: %v", s.GetName(), err)
		}
		feeds[i] = t
	}
	return feeds, nil
}

// handleRunGraph serves RunGraph over starwire: the sends' tensors are the
// request's segments and the fetched tensors the response's, in order.
func (w *Worker) handleRunGraph(ctx context.Context, in *wire.Inbound, resp *rpc.Response) error {
	req := new(tfpb.RunGraphRequest)
	if err := proto.Unmarshal(in.Meta, req); err != nil {
		return rpc.Errorf(wire.InvalidArgument, "RunGraph: decode request: %v", err)
	}
	feeds := in.Tensors
	if len(feeds) == 0 && len(req.GetSend()) > 0 {
		// A caller may put the tensors in the protobuf instead.
		decoded, err := decodeSends(req)
		if err != nil {
			return err
		}
		defer releaseTensors(decoded)
		feeds = decoded
	}
	out, fetches, err := w.runGraph(ctx, req, feeds)
	if err != nil {
		return err
	}
	for i := range fetches {
		resp.Tensors = append(resp.Tensors, onWire(fetches[i]))
	}
	var merr error
	resp.Meta, merr = proto.MarshalOptions{}.MarshalAppend(resp.Meta, out)
	if merr != nil {
		return rpc.Errorf(wire.Internal, "RunGraph: encode response: %v", merr)
	}
	return nil
}
