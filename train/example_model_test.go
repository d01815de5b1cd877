package train_test

import (
	"context"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/train"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// numberModel learns one number, w on ps 0, by gradient descent on
// (w - target)^2: each step, the worker sends ps 0 the target, and ps 0
// sends back the loss (a fetch) and moves w by rate times the gradient.
type numberModel struct {
	s            *train.Session
	target, rate float32
	init         driver.Graph
	ps, worker   []driver.Graph // by replica
	client       []string       // by replica: the device its fetches go to
}

// Bind keeps the session, whose step ids Initialize uses: NewSession
// calls it.
func (m *numberModel) Bind(s *train.Session) { m.s = s }

func (m *numberModel) Build(ctx context.Context, t *train.Tasks) error {
	ps := t.PS[0]
	init, err := t.Register(ctx, ps.Name, m.initGraph(ps))
	if err != nil {
		return err
	}
	n := len(t.Workers)
	psG, workerG, client := make([]driver.Graph, n), make([]driver.Graph, n), make([]string, n)
	for r, w := range t.Workers {
		client[r] = w.Device
		if !w.Live {
			continue
		}
		if psG[r], err = t.Register(ctx, ps.Name, m.stepGraph(ps, w)); err != nil {
			return err
		}
		if workerG[r], err = t.Register(ctx, w.Name, m.targetGraph(ps, w)); err != nil {
			return err
		}
	}
	m.init, m.ps, m.worker, m.client = init, psG, workerG, client
	return nil
}

func (m *numberModel) Initialize(ctx context.Context) error {
	step := m.s.NextStepID()
	if err := m.s.Driver().RunPartitions(ctx, step, driver.Partition{Graph: m.init}); err != nil {
		return err
	}
	return m.s.Driver().CleanupStep(ctx, step, m.s.PSTasks()...)
}

func (m *numberModel) Replica(int) train.Replica { return &numberReplica{m: m} }

type numberReplica struct {
	m   *numberModel
	out handlers.Fetched
}

// Next has nothing to draw: the target is the input of every step.
func (r *numberReplica) Next(context.Context) error { return nil }

func (r *numberReplica) Step(ctx context.Context, on int, step int64) (float64, error) {
	m := r.m
	err := m.s.Driver().RunPartitions(ctx, step,
		driver.Partition{Graph: m.ps[on], Fetches: []string{m.lossKey(on)}, Out: &r.out},
		driver.Partition{Graph: m.worker[on]})
	var loss float64
	if err == nil {
		loss = float64(tensor.View[float32](r.out.Tensors[0].Data)[0])
	}
	r.out.Release()
	return loss, err
}

func (r *numberReplica) Close() {}

// The graphs, node by node.

func (m *numberModel) initGraph(ps train.Task) *tfpb.GraphDef {
	g := &graph{device: ps.Device}
	w := g.variable()
	g.node("w/assign", "AssignVariableOp", attrs{"dtype": dtype(wire.DTFloat)}, w, g.constant("zero", 0))
	return &g.def
}

// stepGraph is ps 0's part of a step of worker w's replica.
func (m *numberModel) stepGraph(ps, w train.Task) *tfpb.GraphDef {
	g := &graph{device: ps.Device}
	v := g.variable()
	x := g.node("w/read", "ReadVariableOp", attrs{"dtype": dtype(wire.DTFloat)}, v)
	target := g.node("target", "_Recv", m.link(w.Device, w.Incarnation, ps.Device, "target:0", attrs{"tensor_type": dtype(wire.DTFloat)}, false))
	diff := g.node("diff", "Sub", attrs{"T": dtype(wire.DTFloat)}, x, target)
	loss := g.node("loss", "Mul", attrs{"T": dtype(wire.DTFloat)}, diff, diff)
	g.node("loss/_send", "_Send", m.link(ps.Device, ps.Incarnation, w.Device, "loss:0", attrs{"T": dtype(wire.DTFloat)}, true), loss)
	step := g.node("step", "Mul", attrs{"T": dtype(wire.DTFloat)}, diff, g.constant("twice_rate", 2*m.rate))
	g.node("w/update", "AssignSubVariableOp", attrs{"dtype": dtype(wire.DTFloat)}, v, step)
	return &g.def
}

// targetGraph is worker w's part: it sends ps 0 the target.
func (m *numberModel) targetGraph(ps, w train.Task) *tfpb.GraphDef {
	g := &graph{device: w.Device}
	t := g.constant("target", m.target)
	g.node("target/_send", "_Send", m.link(w.Device, w.Incarnation, ps.Device, "target:0", attrs{"T": dtype(wire.DTFloat)}, false), t)
	return &g.def
}

// lossKey is the rendezvous key of replica r's loss, fetched by its
// client from ps 0.
func (m *numberModel) lossKey(r int) string {
	t := m.s.Tasks()
	return rendezvous.CreateKey(t.PS[0].Device, t.PS[0].Incarnation, m.client[r], "loss:0", rendezvous.FrameIter{})
}

// link returns a's attributes with those of a transfer of tensor from src
// to dst; client marks a fetch.
func (m *numberModel) link(src string, inc uint64, dst, tensor string, a attrs, client bool) attrs {
	a["tensor_name"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_S{S: []byte(tensor)}}
	a["send_device"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_S{S: []byte(src)}}
	a["send_device_incarnation"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_I{I: int64(inc)}}
	a["recv_device"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_S{S: []byte(dst)}}
	a["client_terminated"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_B{B: client}}
	return a
}

type attrs = map[string]*tfpb.AttrValue

// graph appends nodes placed on one device.
type graph struct {
	device string
	def    tfpb.GraphDef
}

func (g *graph) node(name, op string, a attrs, inputs ...string) string {
	g.def.Node = append(g.def.Node, &tfpb.NodeDef{Name: name, Op: op, Input: inputs, Device: g.device, Attr: a})
	return name
}

func (g *graph) variable() string {
	return g.node("w", "VarHandleOp", attrs{"dtype": dtype(wire.DTFloat), "shape": {Value: &tfpb.AttrValue_Shape{Shape: &tfpb.TensorShapeProto{}}},
		"shared_name": {Value: &tfpb.AttrValue_S{S: []byte("w")}}, "container": {Value: &tfpb.AttrValue_S{S: nil}}})
}

func (g *graph) constant(name string, v float32) string {
	t := &tfpb.TensorProto{Dtype: tfpb.DataType(wire.DTFloat), TensorShape: &tfpb.TensorShapeProto{}, FloatVal: []float32{v}}
	return g.node(name, "Const", attrs{"dtype": dtype(wire.DTFloat), "value": {Value: &tfpb.AttrValue_Tensor{Tensor: t}}})
}

func dtype(dt wire.DataType) *tfpb.AttrValue {
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_Type{Type: tfpb.DataType(dt)}}
}
