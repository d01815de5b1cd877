package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// TensorFlow 1.x's conditional, tf.cond, as its graphs carry it: a Switch
// routes its data to the output its predicate picks and marks the other
// dead; the executor skips every node a dead tensor reaches, and a Merge
// forwards the live one of its inputs. Graphs put them on a ps around
// variable initializers (global_step's, an optimizer slot initialized from
// another variable). Loops (Enter, Exit, NextIteration) are not supported.

func init() {
	t := []TypeAttr{anyType("T")}
	registerOp("Switch", &Spec{Inputs: exactly(2), Types: t, NumOutputs: exactly(2), Build: buildSwitch})
	registerOp("RefSwitch", &Spec{Inputs: exactly(2), Types: t, NumOutputs: exactly(2), Build: buildSwitch})
	registerOp("Merge", &Spec{Inputs: byInt("N", 1), Types: t, NumOutputs: exactly(2), Build: buildMerge, Merges: true})
	registerOp("RefMerge", &Spec{Inputs: byInt("N", 1), Types: t, NumOutputs: exactly(2), Build: buildMerge, Merges: true})
}

// buildSwitch: output_false (0) and output_true (1); the one pred does not
// pick is dead. The data passes as a Value, so that a resource handle or a
// ref stays one.
func buildSwitch(_ *Env, n *Node) (Kernel, error) {
	dt := n.typeOf("T")
	return func(c *Context) error {
		p, err := c.typed(1, wire.DTBool)
		if err != nil {
			return err
		}
		if len(p.Shape) != 0 || len(p.Data) != 1 {
			return status.Errorf(wire.InvalidArgument, "pred must be a scalar, got shape %v", p.Shape)
		}
		live := 0
		if p.Data[0] != 0 {
			live = 1
		}
		c.Out[live] = passValue(c.In[0])
		c.Out[1-live] = deadValue(dt)
		return nil
	}, nil
}

// buildMerge: output (0), the first live input, and value_index (1), its
// index. The executor runs a Merge once its inputs have all arrived and one
// of them is live (Spec.Merges).
func buildMerge(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		for i := range c.In {
			if c.In[i].T.Dead {
				continue
			}
			c.Out[0] = passValue(c.In[i])
			idx, _ := tensor.New(wire.DTInt32, nil)
			setIndex(&idx, 0, int64(i))
			c.setOut(1, idx)
			return nil
		}
		return status.Errorf(wire.Internal, "every input is dead")
	}, nil
}

// passValue returns in as another node's output: a variable as is, a
// tensor with a reference of its own.
func passValue(in Value) Value {
	if in.v != nil {
		return in
	}
	return Value{T: tensor.Ref(in.T), Set: true}
}

// deadValue is a dead output of dtype dt.
func deadValue(dt wire.DataType) Value {
	return Value{T: wire.Tensor{DType: dt, Dead: true}, Set: true}
}
