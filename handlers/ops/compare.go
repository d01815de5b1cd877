package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

// Comparisons: Less, LessEqual, Greater, GreaterEqual, Equal and NotEqual,
// elementwise with broadcasting, to a bool tensor. embedding_lookup's
// "div" strategy needs Less to place ids on the shards of
// fixed_size_partitioner and min_max_variable_partitioner.

type compareKind int

const (
	lessOp compareKind = iota
	lessEqualOp
	greaterOp
	greaterEqualOp
	equalOp
	notEqualOp
)

func init() {
	for name, op := range map[string]compareKind{"Less": lessOp, "LessEqual": lessEqualOp, "Greater": greaterOp,
		"GreaterEqual": greaterEqualOp, "Equal": equalOp, "NotEqual": notEqualOp} {
		registerOp(name, &Spec{Inputs: exactly(2), Types: []TypeAttr{compareByDType.attr("T")}, NumOutputs: exactly(1), Build: buildCompare(op)})
	}
}

// compareTensors is compareInto on tensors of element type T.
func compareTensors[T numeric](op compareKind, r, a, b wire.Tensor, out []int64) {
	compareInto(op, tensor.View[uint8](r.Data), out, tensor.View[T](a.Data), a.Shape, tensor.View[T](b.Data), b.Shape)
}

var compareByDType = numericTable(compareTensors[float32], compareTensors[float64], compareTensors[int32], compareTensors[int64])

func buildCompare(op compareKind) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dt, run := compareByDType.of(n, "T")
		return func(c *Context) error {
			var in [2]*wire.Tensor
			if err := c.typedInputs(dt, in[:]); err != nil {
				return err
			}
			a, b := in[0], in[1]
			out, err := broadcastShape(a.Shape, b.Shape)
			if err != nil {
				return err
			}
			r, err := tensor.New(wire.DTBool, out)
			if err != nil {
				return err
			}
			run(op, r, *a, *b, out)
			c.setOut(0, r)
			return nil
		}, nil
	}
}

// compareInto sets r[i] to 1 where a op b holds, under broadcasting: it
// walks the result's indices, each operand's offset following its strides
// (zero along its broadcast dimensions).
func compareInto[T numeric](op compareKind, r []uint8, out []int64, a []T, as []int64, b []T, bs []int64) {
	sa, sb := broadcastStrides(as, out), broadcastStrides(bs, out)
	idx := make([]int64, len(out))
	var ia, ib int64
	for i := range r {
		x, y := a[ia], b[ib]
		var v bool
		switch op {
		case lessOp:
			v = x < y
		case lessEqualOp:
			v = x <= y
		case greaterOp:
			v = x > y
		case greaterEqualOp:
			v = x >= y
		case equalOp:
			v = x == y
		case notEqualOp:
			v = x != y
		}
		r[i] = 0
		if v {
			r[i] = 1
		}
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
