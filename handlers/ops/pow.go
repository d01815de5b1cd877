package ops

import (
	"math"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

func init() {
	registerOp("Pow", &Spec{Inputs: exactly(2), Types: []TypeAttr{powByDType.attr("T")}, NumOutputs: exactly(1), Build: buildPow})
}

// powTensors computes r = a^b under broadcasting, r of the broadcast
// shape out, in float64 as TensorFlow's CPU kernel rounds std::pow.
func powTensors[T floating](r, a, b wire.Tensor, out []int64) {
	rv, av, bv := tensor.View[T](r.Data), tensor.View[T](a.Data), tensor.View[T](b.Data)
	sa, sb := broadcastStrides(a.Shape, out), broadcastStrides(b.Shape, out)
	idx := make([]int64, len(out))
	var ia, ib int64
	for i := range rv {
		rv[i] = T(math.Pow(float64(av[ia]), float64(bv[ib])))
		for d := len(out) - 1; d >= 0; d-- {
			idx[d]++
			ia += sa[d]
			ib += sb[d]
			if idx[d] < out[d] {
				break
			}
			ia -= sa[d] * out[d]
			ib -= sb[d] * out[d]
			idx[d] = 0
		}
	}
}

var powByDType = floatTable(powTensors[float32], powTensors[float64])

// buildPow builds Pow(x, y) for floating dtypes, with broadcasting: the
// optimizers' bias corrections (Adam's beta1^t) run it on the ps.
func buildPow(_ *Env, n *Node) (Kernel, error) {
	dt, run := powByDType.of(n, "T")
	return func(c *Context) error {
		var in [2]*wire.Tensor
		if err := c.typedInputs(dt, in[:]); err != nil {
			return err
		}
		out, err := broadcastShape(in[0].Shape, in[1].Shape)
		if err != nil {
			return err
		}
		r, err := tensor.New(dt, out)
		if err != nil {
			return err
		}
		run(r, *in[0], *in[1], out)
		c.setOut(0, r)
		return nil
	}, nil
}
