package ops

import (
	crand "crypto/rand"
	"encoding/binary"
	"sync"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// The stateful random ops: RandomUniform (in [0, 1)), RandomStandardNormal,
// TruncatedNormal (standard normal, redrawn outside two standard
// deviations) and RandomUniformInt (in [minval, maxval)), making the values
// TensorFlow's CPU kernels make. Each node owns a Philox generator seeded
// from its seed and seed2 attrs (both zero: from a random seed pair, as in
// TensorFlow); each run takes the stream from where the node's last run
// left it, so a seeded node makes TensorFlow's sequence run after run.
// TensorFlow keeps one kernel per session and node name for stateful ops
// (its OpSegment), so a node registered again in another graph of the
// session continues its stream there; here each graph's node starts from
// its seeds. See random_fill.go for how values are laid out over the
// stream and random_dist.go for how they are made, and why normals may
// differ from TensorFlow's by a few ulps.

func init() {
	seeds := map[string]*tfpb.AttrValue{"seed": intAttr(0), "seed2": intAttr(0)}
	registerOp("RandomUniform", randomSpec(seeds, uniformFills))
	registerOp("RandomStandardNormal", randomSpec(seeds, normalFills))
	registerOp("TruncatedNormal", randomSpec(seeds, truncatedFills))
	registerOp("RandomUniformInt", &Spec{Defaults: seeds, Inputs: exactly(3), Types: []TypeAttr{typeIn("Tout", indexTypes...), typeIn("T", indexTypes...)},
		NumOutputs: exactly(1), Build: buildRandomUniformInt})
}

// randomSpec is the Spec of a stateful random op of input shape, whose
// dtype fills holds code for.
func randomSpec(seeds map[string]*tfpb.AttrValue, fills byDType[randomFill]) *Spec {
	return &Spec{Defaults: seeds, Inputs: exactly(1), Types: []TypeAttr{fills.attr("dtype"), typeIn("T", indexTypes...)},
		NumOutputs: exactly(1), Build: buildRandom(fills)}
}

// guardedPhilox is a node's generator, shared by the steps that run its
// kernel at once, as TensorFlow's GuardedPhiloxRandom is.
type guardedPhilox struct {
	mu  sync.Mutex
	gen philox
}

// newGuardedPhilox seeds a node's generator from its seed attrs.
func newGuardedPhilox(n *Node) (*guardedPhilox, error) {
	seed, err := n.attrInt("seed")
	if err != nil {
		return nil, err
	}
	seed2, err := n.attrInt("seed2")
	if err != nil {
		return nil, err
	}
	s, s2 := uint64(seed), uint64(seed2)
	if seed == 0 && seed2 == 0 {
		var b [16]byte
		crand.Read(b[:]) // never fails (it crashes the program instead)
		s, s2 = binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])
	}
	return &guardedPhilox{gen: newPhilox(s, s2)}, nil
}

// reserve returns the generator at the start of the next n samples and
// moves past them.
func (g *guardedPhilox) reserve(n uint64) philox {
	g.mu.Lock()
	p := g.gen
	g.gen.skip(n)
	g.mu.Unlock()
	return p
}

func buildRandom(fills byDType[randomFill]) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dt, fill := fills.of(n, "dtype")
		gen, err := newGuardedPhilox(n)
		if err != nil {
			return nil, err
		}
		return func(c *Context) error {
			r, err := newRandomOutput(c, dt)
			if err != nil {
				return err
			}
			g := gen.reserve(uint64(len(r.Data)/dt.Size()) * reservedSamplesPerOutput)
			if err := fill(g, r.Data); err != nil {
				r.Buf.Release()
				return err
			}
			c.setOut(0, r)
			return nil
		}, nil
	}
}

func buildRandomUniformInt(_ *Env, n *Node) (Kernel, error) {
	dt := n.typeOf("Tout")
	gen, err := newGuardedPhilox(n)
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		lo, hi, err := intBounds(c, dt)
		if err != nil {
			return err
		}
		r, err := newRandomOutput(c, dt)
		if err != nil {
			return err
		}
		g := gen.reserve(uint64(len(r.Data)/dt.Size()) * reservedSamplesPerOutput)
		uniformIntFill(dt, g, r.Data, lo, hi)
		c.setOut(0, r)
		return nil
	}, nil
}

// intBounds reads RandomUniformInt's minval and maxval, scalars of dt with
// minval below maxval.
func intBounds(c *Context, dt wire.DataType) (lo, hi int64, err error) {
	var b [2]int64
	for i := range b {
		t, err := c.typed(1+i, dt)
		if err != nil {
			return 0, 0, err
		}
		if len(t.Shape) != 0 {
			return 0, 0, status.Errorf(wire.InvalidArgument, "%s must be 0-D, got shape %v", [2]string{"minval", "maxval"}[i], t.Shape)
		}
		if dt == wire.DTInt64 {
			b[i] = tensor.View[int64](t.Data)[0]
		} else {
			b[i] = int64(tensor.View[int32](t.Data)[0])
		}
	}
	if b[0] >= b[1] {
		return 0, 0, status.Errorf(wire.InvalidArgument, "Need minval < maxval, got %d >= %d", b[0], b[1])
	}
	return b[0], b[1], nil
}

// newRandomOutput allocates the output of dtype dt whose shape input 0
// holds, an int32 or int64 vector of dimensions none negative. It checks
// what tensor.New checks itself, so that the shape it reads is the
// output's (tensor.New would copy it, an allocation more).
func newRandomOutput(c *Context, dt wire.DataType) (wire.Tensor, error) {
	st, err := c.input(0)
	if err != nil {
		return wire.Tensor{}, err
	}
	if (st.DType != wire.DTInt32 && st.DType != wire.DTInt64) || len(st.Shape) != 1 {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "shape must be an int vector, is %v%v", st.DType, st.Shape)
	}
	var dims []int64
	if st.DType == wire.DTInt64 {
		dims = append([]int64(nil), tensor.View[int64](st.Data)...)
	} else {
		v := tensor.View[int32](st.Data)
		dims = make([]int64, len(v))
		for i, x := range v {
			dims[i] = int64(x)
		}
	}
	for _, x := range dims {
		if x < 0 {
			return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "negative dimension in shape %v", dims)
		}
	}
	n, ok := tensor.NumElements(dims)
	if !ok || n > tensor.MaxBytes/int64(dt.Size()) {
		return tensor.New(dt, dims) // its error
	}
	buf := wire.NewBuffer(int(n) * dt.Size())
	return wire.Tensor{DType: dt, Shape: dims, Data: buf.Bytes(), Buf: buf}, nil
}
