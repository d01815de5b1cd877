package ops

import (
	"math"
	"math/rand/v2"
	"sync"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// The random initializers: RandomUniform (in [0, 1)), RandomStandardNormal
// and TruncatedNormal (standard normal, redrawn outside two standard
// deviations), as TensorFlow documents them. As in TensorFlow, a node with
// seed and seed2 both zero draws from a seed of its own, and a seeded node
// draws the same sequence in every graph it is built in, advancing from run
// to run. The generator is not TensorFlow's Philox, so seeded values differ
// from TensorFlow's.

type distribution int

const (
	uniformDist distribution = iota
	normalDist
	truncatedDist
)

func init() {
	seeds := map[string]*tfpb.AttrValue{"seed": intAttr(0), "seed2": intAttr(0)}
	registerOp("RandomUniform", &Spec{Defaults: seeds, Build: buildRandom(uniformDist)})
	registerOp("RandomStandardNormal", &Spec{Defaults: seeds, Build: buildRandom(normalDist)})
	registerOp("TruncatedNormal", &Spec{Defaults: seeds, Build: buildRandom(truncatedDist)})
}

func buildRandom(d distribution) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		if err := n.wantInputs(1); err != nil {
			return nil, err
		}
		dt, fill, err := randomByDType.forAttr(n, "dtype")
		if err != nil {
			return nil, err
		}
		if _, err := n.attrTypeIn("T", indexTypes...); err != nil {
			return nil, err
		}
		seed, err := n.attrInt("seed")
		if err != nil {
			return nil, err
		}
		seed2, err := n.attrInt("seed2")
		if err != nil {
			return nil, err
		}
		var src *rand.Rand
		if seed == 0 && seed2 == 0 {
			src = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		} else {
			src = rand.New(rand.NewPCG(uint64(seed), uint64(seed2)))
		}
		var mu sync.Mutex // the kernel's stream, shared by its steps
		n.NumOutputs = 1
		return func(c *Context) error {
			st, err := c.input(0)
			if err != nil {
				return err
			}
			dims, err := indices(st)
			if err != nil || len(st.Shape) != 1 {
				return errOr(err, "shape must be an int vector, is %v%v", st.DType, st.Shape)
			}
			for _, x := range dims {
				if x < 0 {
					return status.Errorf(wire.InvalidArgument, "negative dimension in shape %v", dims)
				}
			}
			r, err := tensor.New(dt, dims)
			if err != nil {
				return err
			}
			mu.Lock()
			fill(r, src, d)
			mu.Unlock()
			c.setOut(0, r)
			return nil
		}, nil
	}
}

// fillRandomTensor is fillRandom on a tensor of element type T.
func fillRandomTensor[T floating](r wire.Tensor, src *rand.Rand, d distribution) {
	fillRandom(tensor.View[T](r.Data), src, d)
}

var randomByDType = floatTable(fillRandomTensor[float32], fillRandomTensor[float64])

func fillRandom[T floating](out []T, src *rand.Rand, d distribution) {
	for i := range out {
		switch d {
		case uniformDist:
			// Float64 is in [0, 1); rounding to float32 may reach 1.
			x := T(src.Float64())
			for x >= 1 {
				x = T(src.Float64())
			}
			out[i] = x
		case normalDist:
			out[i] = T(src.NormFloat64())
		case truncatedDist:
			x := src.NormFloat64()
			for math.Abs(x) > 2 {
				x = src.NormFloat64()
			}
			out[i] = T(x)
		}
	}
}
