package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// The stateless random ops, which TensorFlow 2's initializers and
// tf.random.stateless_* emit: the same distributions as the stateful ops
// over the same Philox stream layout, started from a key and counter
// passed as inputs rather than from a node's state, so each run makes the
// same values. StatelessRandomGetKeyCounter derives key and counter from
// a seed pair as tf.random's functions do; the V1 ops take the seed pair
// themselves.

// Philox is TensorFlow's algorithm 1; 3 (auto-select) means it on CPU.
const (
	rngAlgPhilox     = 1
	rngAlgAutoSelect = 3
)

func init() {
	v2 := map[string]*tfpb.AttrValue{"dtype": typeAttr(wire.DTFloat), "Tshape": typeAttr(wire.DTInt32)}
	// shape, key, counter and alg.
	v2Spec := func(fills byDType[randomFill]) *Spec {
		return &Spec{Defaults: v2, Inputs: exactly(4), Types: []TypeAttr{fills.attr("dtype"), typeIn("Tshape", indexTypes...)},
			NumOutputs: exactly(1), Build: buildStatelessV2(fills)}
	}
	registerOp("StatelessRandomUniformV2", v2Spec(uniformFills))
	registerOp("StatelessRandomNormalV2", v2Spec(normalFills))
	registerOp("StatelessTruncatedNormalV2", v2Spec(truncatedFills))
	v1 := map[string]*tfpb.AttrValue{"dtype": typeAttr(wire.DTFloat), "T": typeAttr(wire.DTInt32), "Tseed": typeAttr(wire.DTInt64)}
	// shape and seed.
	v1Spec := func(fills byDType[randomFill]) *Spec {
		return &Spec{Defaults: v1, Inputs: exactly(2), Types: []TypeAttr{fills.attr("dtype"), typeIn("T", indexTypes...), typeIn("Tseed", indexTypes...)},
			NumOutputs: exactly(1), Build: buildStatelessV1(fills)}
	}
	registerOp("StatelessRandomUniform", v1Spec(uniformFills))
	registerOp("StatelessRandomNormal", v1Spec(normalFills))
	registerOp("StatelessTruncatedNormal", v1Spec(truncatedFills))
	seed := map[string]*tfpb.AttrValue{"Tseed": typeAttr(wire.DTInt64)}
	tseed := []TypeAttr{typeIn("Tseed", indexTypes...)}
	registerOp("StatelessRandomGetKeyCounter", &Spec{Defaults: seed, Inputs: exactly(1), Types: tseed, Build: buildGetKeyCounter(false), Outputs: []string{"key", "counter"}})
	registerOp("StatelessRandomGetKeyCounterAlg", &Spec{Defaults: seed, Inputs: exactly(1), Types: tseed, Build: buildGetKeyCounter(true), Outputs: []string{"key", "counter", "alg"}})
	registerOp("StatelessRandomGetAlg", &Spec{Inputs: exactly(0), NumOutputs: exactly(1), Build: buildGetAlg})
}

// buildStatelessV2 builds the ops of inputs shape, key, counter and alg.
func buildStatelessV2(fills byDType[randomFill]) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dt, fill := fills.of(n, "dtype")
		return func(c *Context) error {
			g, alg, err := keyCounterAlg(c)
			if err != nil {
				return err
			}
			return fillStateless(c, dt, fill, g, alg)
		}, nil
	}
}

// keyCounterAlg reads inputs 1 to 3 of a V2 op as TensorFlow checks them:
// alg an int32 scalar, key a uint64 vector of 1 and counter one of at
// least 2. (TensorFlow asks of the counter as many elements as the
// algorithm's id, 1 for Philox, and then reads 2.)
func keyCounterAlg(c *Context) (philox, int32, error) {
	var in [3]*wire.Tensor
	for i := range in {
		t, err := c.input(1 + i)
		if err != nil {
			return philox{}, 0, err
		}
		in[i] = t
	}
	key, ctr, algT := in[0], in[1], in[2]
	if len(algT.Shape) != 0 {
		return philox{}, 0, status.Errorf(wire.InvalidArgument, "input 3 (0-based) must have shape [], not %v", algT.Shape)
	}
	if algT.DType != wire.DTInt32 {
		return philox{}, 0, status.Errorf(wire.InvalidArgument, "dtype of input 3 (0-based) must be int32, not %v", algT.DType)
	}
	alg := tensor.View[int32](algT.Data)[0]
	if alg == rngAlgAutoSelect {
		alg = rngAlgPhilox
	}
	if key.DType != wire.DTUint64 || len(key.Shape) != 1 || key.Shape[0] != 1 {
		return philox{}, 0, status.Errorf(wire.InvalidArgument, "key must have shape [1], not %v%v. (Note that batched keys are not supported yet.)", key.DType, key.Shape)
	}
	if ctr.DType != wire.DTUint64 || len(ctr.Shape) != 1 || ctr.Shape[0] < 2 {
		return philox{}, 0, status.Errorf(wire.InvalidArgument, "counter must be a vector with length at least 2; got shape: %v%v. (Note that batched counters are not supported yet.)", ctr.DType, ctr.Shape)
	}
	cv := tensor.View[uint64](ctr.Data)
	return philoxFromKeyCounter(tensor.View[uint64](key.Data)[0], cv[0], cv[1]), alg, nil
}

// fillStateless makes the output of a stateless op from g. An empty
// output needs no algorithm, as in TensorFlow.
func fillStateless(c *Context, dt wire.DataType, fill randomFill, g philox, alg int32) error {
	r, err := newRandomOutput(c, dt)
	if err != nil {
		return err
	}
	if len(r.Data) > 0 && alg != rngAlgPhilox {
		r.Buf.Release()
		return status.Errorf(wire.InvalidArgument, "Unsupported algorithm id: %d", alg)
	}
	if err := fill(g, r.Data); err != nil {
		r.Buf.Release()
		return err
	}
	c.setOut(0, r)
	return nil
}

// buildStatelessV1 builds the ops of inputs shape and seed.
func buildStatelessV1(fills byDType[randomFill]) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dt, fill := fills.of(n, "dtype")
		return func(c *Context) error {
			g, err := seedPhilox(c, 1)
			if err != nil {
				return err
			}
			return fillStateless(c, dt, fill, g, rngAlgPhilox)
		}, nil
	}
}

// seedPhilox reads input i, an int32 or int64 seed pair, and returns the
// generator TensorFlow's stateless ops derive from it (GenerateKey): the
// pair, as a counter, encrypted under a fixed key; the sample's first two
// words become the key, its last two the counter's high half.
func seedPhilox(c *Context, i int) (philox, error) {
	t, err := c.input(i)
	if err != nil {
		return philox{}, err
	}
	if len(t.Shape) != 1 || t.Shape[0] != 2 {
		return philox{}, status.Errorf(wire.InvalidArgument, "seed must have shape [2], not %v", t.Shape)
	}
	var s0, s1 uint64
	switch t.DType {
	case wire.DTInt32:
		v := tensor.View[int32](t.Data)
		s0, s1 = uint64(int64(v[0])), uint64(int64(v[1]))
	case wire.DTInt64:
		v := tensor.View[int64](t.Data)
		s0, s1 = uint64(v[0]), uint64(v[1])
	default:
		return philox{}, status.Errorf(wire.InvalidArgument, "Invalid seed type: %v", t.DType)
	}
	mix := philox{key: [2]uint32{0x3ec8f720, 0x02461e29}, ctr: [4]uint32{uint32(s0), uint32(s0 >> 32), uint32(s1), uint32(s1 >> 32)}}
	m := mix.next()
	return philox{key: [2]uint32{m[0], m[1]}, ctr: [4]uint32{0, 0, m[2], m[3]}}, nil
}

// buildGetKeyCounter builds StatelessRandomGetKeyCounter (outputs key and
// counter, uint64 vectors of 1 and 2) and, with alg,
// StatelessRandomGetKeyCounterAlg (and the algorithm, Philox).
func buildGetKeyCounter(alg bool) func(*Env, *Node) (Kernel, error) {
	return func(*Env, *Node) (Kernel, error) {
		return func(c *Context) error {
			g, err := seedPhilox(c, 0)
			if err != nil {
				return err
			}
			key, err := tensor.New(wire.DTUint64, []int64{1})
			if err != nil {
				return err
			}
			ctr, err := tensor.New(wire.DTUint64, []int64{2})
			if err != nil {
				key.Buf.Release()
				return err
			}
			tensor.View[uint64](key.Data)[0] = uint64(g.key[0]) | uint64(g.key[1])<<32
			cv := tensor.View[uint64](ctr.Data)
			cv[0] = uint64(g.ctr[0]) | uint64(g.ctr[1])<<32
			cv[1] = uint64(g.ctr[2]) | uint64(g.ctr[3])<<32
			c.setOut(0, key)
			c.setOut(1, ctr)
			if alg {
				return setAlgOut(c, 2)
			}
			return nil
		}, nil
	}
}

func buildGetAlg(*Env, *Node) (Kernel, error) {
	return func(c *Context) error { return setAlgOut(c, 0) }, nil
}

// setAlgOut sets output i to the int32 scalar naming Philox.
func setAlgOut(c *Context, i int) error {
	a, err := tensor.New(wire.DTInt32, nil)
	if err != nil {
		return err
	}
	tensor.View[int32](a.Data)[0] = rngAlgPhilox
	c.setOut(i, a)
	return nil
}
