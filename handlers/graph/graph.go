package graph

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// A Graph is a partition checked and ready to run: nodes with resolved
// inputs, kernels built from their attributes, and the index of its feeds
// and fetches. It is immutable once built, so concurrent steps share it.
type Graph struct {
	env *ops.Env

	nodes  []*node
	byName map[string]*node
	// feeds and fetches of TensorFlow's client-terminated _Recv and _Send
	// nodes, by rendezvous key; named feeds are Placeholder and _Arg nodes
	// by name.
	feedRecvs  map[string]*node
	fetchSends map[string]*node
	namedFeeds map[string]*node
	roots      []int // nodes without inputs
	// Steps keep every node's inputs and outputs in two flat arrays; node
	// n's are at inOff[n] and outOff[n]. pending is each node's number of
	// incoming edges.
	inOff, outOff   []int
	numIns, numOuts int
	pending         []int

	// scratch keeps finished steps' arrays for the next step (see
	// stepScratch).
	scratch sync.Pool
}

// A node is one operation of a graph: what its kernel's builder saw and
// set (ops.Node), and its place in the graph.
type node struct {
	ops.Node
	id       int
	inputs   []edge // data inputs
	controls []int  // control inputs
	outs     []int  // consumers, one entry per data or control edge

	spec   *ops.Spec
	kernel ops.Kernel
	// inline runs an asynchronous op on the executing goroutine: a
	// client-terminated _Recv, whose tensor RunGraph puts in the
	// rendezvous before the step starts, never waits.
	inline bool
	// computes is set when the kernel runs holding a compute token: it
	// neither waits (Async) nor hands tensors to the network (Sends).
	computes bool
}

// An edge is a data input: output port of node.
type edge struct{ node, port int }

// graphError is the error of RegisterGraph for node n.
func graphError(n *tfpb.NodeDef, format string, args ...any) error {
	return status.Errorf(wire.InvalidArgument, "RegisterGraph: node %q (%s): %s", n.GetName(), n.GetOp(), fmt.Sprintf(format, args...))
}

// notRegistered is TensorFlow's answer to a node whose op this binary does
// not have: NotFound, in the words masters and users look for.
func notRegistered(n *tfpb.NodeDef, env *ops.Env) error {
	return status.Errorf(wire.NotFound, "Op type not registered '%s' in binary running on %s. Make sure the Op and Kernel are registered in the binary running in this process. (RegisterGraph: node %q)", n.GetOp(), hostOf(env), n.GetName())
}

func hostOf(env *ops.Env) string {
	if env.Host == "" {
		return "this task"
	}
	return env.Host
}

// Build checks def and builds its kernels against env: every op must be
// known, every attribute well formed, every input an existing node's
// output, and the graph acyclic. Errors name the node; they are NotFound
// for an op this binary does not have, as in TensorFlow, and
// InvalidArgument otherwise.
func Build(def *tfpb.GraphDef, env *ops.Env) (*Graph, error) {
	if def == nil || len(def.GetNode()) == 0 {
		return nil, status.Errorf(wire.InvalidArgument, "RegisterGraph: empty graph")
	}
	nodes := def.GetNode()
	var lib *library
	if len(def.GetLibrary().GetFunction()) > 0 {
		var err error
		if lib, err = newLibrary(def.GetLibrary(), hostOf(env)); err != nil {
			return nil, err
		}
		if nodes, err = lib.expand(def); err != nil {
			return nil, err
		}
	}
	g, err := build(nodes, env)
	if err != nil && lib != nil {
		err = lib.annotate(err)
	}
	return g, err
}

// annotate adds to an error naming an inlined node the function it came
// from.
func (l *library) annotate(err error) error {
	var st *status.Status
	if !errors.As(err, &st) {
		return err
	}
	for name, origin := range l.origin {
		if strings.Contains(st.Msg, strconv.Quote(name)) {
			return status.Errorf(st.Code, "%s (in %s)", st.Msg, origin)
		}
	}
	return err
}

// build checks the nodes of a graph, its calls inlined, and builds them.
func build(nodes []*tfpb.NodeDef, env *ops.Env) (*Graph, error) {
	g := &Graph{
		env:        env,
		byName:     make(map[string]*node, len(nodes)),
		feedRecvs:  make(map[string]*node),
		fetchSends: make(map[string]*node),
		namedFeeds: make(map[string]*node),
	}
	for i, nd := range nodes {
		if nd.GetName() == "" {
			return nil, status.Errorf(wire.InvalidArgument, "RegisterGraph: node %d has no name", i)
		}
		if _, dup := g.byName[nd.GetName()]; dup {
			return nil, graphError(nd, "duplicate node name")
		}
		spec := ops.Lookup(nd.GetOp())
		if spec == nil {
			return nil, notRegistered(nd, env)
		}
		n := &node{id: i, spec: spec, Node: ops.Node{Name: nd.GetName(), Op: nd.GetOp(), Attrs: make(map[string]*tfpb.AttrValue, len(nd.GetAttr())+len(spec.Defaults))}}
		for k, v := range spec.Defaults {
			n.Attrs[k] = v
		}
		for k, v := range nd.GetAttr() {
			n.Attrs[k] = v
		}
		g.nodes = append(g.nodes, n)
		g.byName[n.Name] = n
	}
	for i, nd := range nodes {
		if err := g.resolveInputs(g.nodes[i], nd); err != nil {
			return nil, err
		}
	}
	for i, nd := range nodes {
		n := g.nodes[i]
		k, err := n.spec.Kernel(env, &n.Node)
		if err != nil {
			return nil, graphError(nd, "%v", err)
		}
		n.kernel = k
		n.computes = !n.spec.Async && !n.spec.Sends
		if err := g.index(n); err != nil {
			return nil, graphError(nd, "%v", err)
		}
	}
	// Output counts are known once every kernel is built.
	for i, nd := range nodes {
		for _, e := range g.nodes[i].inputs {
			if src := g.nodes[e.node]; e.port >= src.NumOutputs {
				return nil, graphError(nd, "input %s:%d: %s has %d outputs", src.Name, e.port, src.Op, src.NumOutputs)
			}
		}
	}
	if err := g.checkAcyclic(); err != nil {
		return nil, err
	}
	g.layout()
	return g, nil
}

// resolveInputs parses "node", "node:1" and "^node" inputs.
func (g *Graph) resolveInputs(n *node, nd *tfpb.NodeDef) error {
	for _, in := range nd.GetInput() {
		if ctrl, ok := strings.CutPrefix(in, "^"); ok {
			src := g.byName[ctrl]
			if src == nil {
				return graphError(nd, "control input %q: no such node", in)
			}
			n.controls = append(n.controls, src.id)
			src.outs = append(src.outs, n.id)
			continue
		}
		if len(n.controls) > 0 {
			return graphError(nd, "data input %q after a control input", in)
		}
		name, port := in, 0
		if i := strings.LastIndexByte(in, ':'); i >= 0 {
			p, err := strconv.Atoi(in[i+1:])
			if err != nil || p < 0 {
				return graphError(nd, "input %q: bad output index", in)
			}
			name, port = in[:i], p
		}
		src := g.byName[name]
		if src == nil {
			return graphError(nd, "input %q: no such node", in)
		}
		n.inputs = append(n.inputs, edge{src.id, port})
		src.outs = append(src.outs, n.id)
	}
	if len(n.inputs) == 0 && len(n.controls) == 0 {
		g.roots = append(g.roots, n.id)
	}
	n.NumInputs = len(n.inputs)
	return nil
}

// index records n when it is a feed or a fetch.
func (g *Graph) index(n *node) error {
	switch {
	case n.Op == "_Recv" && n.ClientTerminated:
		if _, dup := g.feedRecvs[n.Key]; dup {
			return fmt.Errorf("second client-terminated _Recv of key %q", n.Key)
		}
		g.feedRecvs[n.Key] = n
		n.inline = true
	case n.Op == "_Send" && n.ClientTerminated:
		if _, dup := g.fetchSends[n.Key]; dup {
			return fmt.Errorf("second client-terminated _Send of key %q", n.Key)
		}
		g.fetchSends[n.Key] = n
	case n.Op == "Placeholder" || n.Op == "_Arg":
		g.namedFeeds[n.Name] = n
	}
	return nil
}

// checkAcyclic runs Kahn's algorithm and names a node on a cycle.
func (g *Graph) checkAcyclic() error {
	pending := make([]int, len(g.nodes))
	for _, n := range g.nodes {
		pending[n.id] = len(n.inputs) + len(n.controls)
	}
	ready := append([]int(nil), g.roots...)
	done := 0
	for len(ready) > 0 {
		id := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		done++
		for _, o := range g.nodes[id].outs {
			if pending[o]--; pending[o] == 0 {
				ready = append(ready, o)
			}
		}
	}
	if done == len(g.nodes) {
		return nil
	}
	for id, p := range pending {
		if p > 0 {
			return status.Errorf(wire.InvalidArgument, "RegisterGraph: node %q (%s) is on a cycle or waits for one", g.nodes[id].Name, g.nodes[id].Op)
		}
	}
	return nil
}

// layout computes the offsets of the nodes' inputs and outputs in a
// step's flat arrays, so that a step allocates them at once.
func (g *Graph) layout() {
	g.inOff, g.outOff = make([]int, len(g.nodes)), make([]int, len(g.nodes))
	g.pending = make([]int, len(g.nodes))
	for i, n := range g.nodes {
		g.inOff[i], g.outOff[i] = g.numIns, g.numOuts
		g.numIns += len(n.inputs)
		g.numOuts += n.NumOutputs
		g.pending[i] = len(n.inputs) + len(n.controls)
	}
}
