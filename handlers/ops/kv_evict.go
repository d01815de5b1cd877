package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	registerOp("KvResourceEvict", &Spec{Defaults: map[string]*tfpb.AttrValue{"dtype": typeAttr(wire.DTFloat)},
		Inputs: exactly(2), Types: kvStepTypes, NumOutputs: exactly(1), Build: buildKvResourceEvict})
}

// buildKvResourceEvict builds KvResourceEvict(resource, global_step) ->
// evicted: the eviction SaveV2 runs before it saves an embedding variable
// (DeepRec's Shrink), asked for by a graph between saves: the rows of the
// variable's table not updated within its steps_to_live of global_step,
// and those whose L2 norm is below its l2_weight_threshold, are removed
// with their slots, and their number is the output. It is starwire's op;
// DeepRec evicts only inside SaveV2.
func buildKvResourceEvict(_ *Env, n *Node) (Kernel, error) {
	keyType, stepType := n.typeOf("Tkeys"), n.typeOf("Tstep")
	return func(c *Context) error {
		v, err := c.kvVarKeyed(0, keyType)
		if err != nil {
			return err
		}
		step, err := c.globalStep(1, stepType)
		if err != nil {
			return err
		}
		t, _, err := v.kvTable()
		if err != nil {
			return err
		}
		p := v
		if v.primary != nil {
			p = v.primary
		}
		p.mu.Lock()
		stl, minL2 := p.stepsToLive, p.minL2
		p.mu.Unlock()
		gs, _ := indices(step)
		out, err := tensor.New(wire.DTInt64, nil)
		if err != nil {
			return err
		}
		tensor.View[int64](out.Data)[0] = int64(t.Evict(gs[0], stl, minL2))
		c.setOut(0, out)
		return nil
	}, nil
}
