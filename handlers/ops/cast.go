package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Cast converts between the real types and bool, as C++'s static_cast
// does in TensorFlow: floats to integers truncate toward zero, wider
// integers to narrower ones keep the low bits, anything to bool is
// whether it is non-zero, and bool is 0 or 1.

func init() {
	registerOp("Cast", &Spec{Defaults: map[string]*tfpb.AttrValue{"Truncate": boolAttr(false)},
		Inputs: exactly(1), Types: []TypeAttr{castByDType.attr("SrcT"), typeIn("DstT", castTypes...)}, NumOutputs: exactly(1), Build: buildCast})
}

func buildCast(_ *Env, n *Node) (Kernel, error) {
	src, casts := castByDType.of(n, "SrcT")
	dst, run := casts.of(n, "DstT")
	return func(c *Context) error {
		t, err := c.typed(0, src)
		if err != nil {
			return err
		}
		if src == dst {
			c.forward(0, t)
			return nil
		}
		r, err := tensor.New(dst, t.Shape)
		if err != nil {
			return err
		}
		run(r, *t)
		c.setOut(0, r)
		return nil
	}, nil
}

// A caster converts a tensor's elements into r, of the same shape.
type caster func(r, t wire.Tensor)

// castByDType holds, for each source type, the casts to every destination
// type; bool is read as uint8.
var castByDType = castTable(castsFrom[float32](), castsFrom[float64](), castsFrom[int32](), castsFrom[int64](),
	castsFrom[int8](), castsFrom[uint8](), castsFrom[int16](), castsFrom[uint16](), castsFrom[uint8]())

// castsFrom returns the casts from source type S to every type of
// castTypes.
func castsFrom[S tensor.Elem]() byDType[caster] {
	return castTable[caster](castInto[float32, S], castInto[float64, S], castInto[int32, S], castInto[int64, S],
		castInto[int8, S], castInto[uint8, S], castInto[int16, S], castInto[uint16, S], castToBool[S])
}

// castInto converts t's elements of type S into r's of type D.
func castInto[D, S tensor.Elem](r, t wire.Tensor) {
	convert(tensor.View[D](r.Data), tensor.View[S](t.Data))
}

// castToBool sets r's elements to whether t's are non-zero.
func castToBool[S tensor.Elem](r, t wire.Tensor) {
	dst := tensor.View[uint8](r.Data)
	for i, x := range tensor.View[S](t.Data)[:len(dst)] {
		dst[i] = 0
		if x != 0 {
			dst[i] = 1
		}
	}
}

func convert[D, S tensor.Elem](dst []D, src []S) {
	src = src[:len(dst)]
	for i, x := range src {
		dst[i] = D(x)
	}
}
