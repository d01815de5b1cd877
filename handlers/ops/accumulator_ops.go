package ops

import (
	"fmt"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// The ops of conditional accumulators (accumulator.go), as
// core/ops/data_flow_ops.cc defines them. The Resource* ops take a
// resource handle; the others a ref to a string handle, which here is the
// same handle with the dtype string.

func init() {
	defaults := map[string]*tfpb.AttrValue{"container": stringAttr(""), "shared_name": stringAttr(""), "reduction_type": stringAttr("MEAN")}
	made := []TypeAttr{accumTable.attr("dtype")}
	registerOp("ConditionalAccumulator", resourceSpec(defaults, made, buildAccumulator(false, wire.DTString)))
	registerOp("ResourceConditionalAccumulator", resourceSpec(defaults, made, buildAccumulator(false, wire.DTResource)))
	registerOp("SparseConditionalAccumulator", resourceSpec(defaults, made, buildAccumulator(true, wire.DTString)))
	// The ops on one check their dtype against the accumulator's when
	// they run.
	dtype := []TypeAttr{anyType("dtype")}
	registerOp("AccumulatorApplyGradient", &Spec{Inputs: exactly(3), Types: dtype, NumOutputs: exactly(0), Build: buildApplyGradient})
	registerOp("ResourceAccumulatorApplyGradient", &Spec{Inputs: exactly(3), Types: dtype, NumOutputs: exactly(0), Build: buildApplyGradient})
	registerOp("SparseAccumulatorApplyGradient", &Spec{Inputs: exactly(5), Types: dtype, NumOutputs: exactly(0), Build: buildSparseApplyGradient})
	registerOp("AccumulatorTakeGradient", &Spec{Async: true, Inputs: exactly(2), Types: dtype, NumOutputs: exactly(1), Build: buildTakeGradient(false)})
	registerOp("ResourceAccumulatorTakeGradient", &Spec{Async: true, Inputs: exactly(2), Types: dtype, NumOutputs: exactly(1), Build: buildTakeGradient(false)})
	registerOp("SparseAccumulatorTakeGradient", &Spec{Async: true, Inputs: exactly(2), Types: dtype, Build: buildTakeGradient(true), Outputs: []string{"indices", "values", "shape"}})
	registerOp("AccumulatorSetGlobalStep", &Spec{Inputs: exactly(2), NumOutputs: exactly(0), Build: buildSetGlobalStep})
	registerOp("ResourceAccumulatorSetGlobalStep", &Spec{Inputs: exactly(2), NumOutputs: exactly(0), Build: buildSetGlobalStep})
	registerOp("AccumulatorNumAccumulated", &Spec{Inputs: exactly(1), NumOutputs: exactly(1), Build: buildNumAccumulated})
	registerOp("ResourceAccumulatorNumAccumulated", &Spec{Inputs: exactly(1), NumOutputs: exactly(1), Build: buildNumAccumulated})
}

const accumulatorWhat = "an accumulator"

// buildAccumulator builds the ops that make an accumulator, sparse or
// dense, whose handle has dtype handle.
func buildAccumulator(sparse bool, handle wire.DataType) func(*Env, *Node) (Kernel, error) {
	return func(env *Env, n *Node) (Kernel, error) {
		dt, arith := accumTable.of(n, "dtype")
		shape, err := n.attrShape("shape")
		if err != nil {
			return nil, err
		}
		red, err := n.attrString("reduction_type")
		if err != nil {
			return nil, err
		}
		if red != "MEAN" && red != "SUM" {
			return nil, fmt.Errorf("attr \"reduction_type\" is %q, want \"MEAN\" or \"SUM\"", red)
		}
		create := func(name string) resource {
			return &accumulator{name: name, sparse: sparse, dtype: dt, shape: shape, mean: red == "MEAN", arith: arith}
		}
		// TensorFlow hands out the accumulator a shared name holds,
		// whatever node made it; an op then checks its dtype. Only a
		// sparse and a dense one cannot share a name here.
		check := func(r resource) error {
			if a, ok := r.(*accumulator); !ok || a.sparse != sparse {
				return status.Errorf(wire.InvalidArgument, "shared accumulator %s is not %s", r.resourceName(), map[bool]string{true: "sparse", false: "dense"}[sparse])
			}
			return nil
		}
		op, err := newResourceOp(env, n, accumulatorKind, handle, create, check)
		if err != nil {
			return nil, err
		}
		return op.kernel, nil
	}
}

// accumulatorOf returns the accumulator of input 0, after checking that
// it holds dtype dt and is sparse or not.
func accumulatorOf(c *Context, dt wire.DataType, sparse bool) (*accumulator, error) {
	a, err := inputResource[*accumulator](c, 0, accumulatorWhat)
	if err != nil {
		return nil, err
	}
	if a.sparse != sparse {
		return nil, status.Errorf(wire.InvalidArgument, "accumulator %s is %s", a.name, map[bool]string{true: "sparse", false: "dense"}[a.sparse])
	}
	if a.dtype != dt {
		return nil, status.Errorf(wire.InvalidArgument, "accumulator %s holds %v, the op's dtype is %v", a.name, a.dtype, dt)
	}
	return a, nil
}

func buildApplyGradient(_ *Env, n *Node) (Kernel, error) {
	dt := n.typeOf("dtype")
	return func(c *Context) error {
		a, err := accumulatorOf(c, dt, false)
		if err != nil {
			return err
		}
		step, err := scalarInput(c, 1, wire.DTInt64, "Argument local_step")
		if err != nil {
			return err
		}
		g, err := c.typed(2, dt)
		if err != nil {
			return err
		}
		return a.applyDense(tensor.View[int64](step.Data)[0], g)
	}, nil
}

func buildSparseApplyGradient(_ *Env, n *Node) (Kernel, error) {
	dt := n.typeOf("dtype")
	known, err := n.attrBool("has_known_shape")
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		a, err := accumulatorOf(c, dt, true)
		if err != nil {
			return err
		}
		step, err := scalarInput(c, 1, wire.DTInt64, "Argument local_step")
		if err != nil {
			return err
		}
		var g sparseGrad
		if g.indices, err = c.typed(2, wire.DTInt64); err != nil {
			return err
		}
		if g.values, err = c.typed(3, dt); err != nil {
			return err
		}
		shape, err := c.typed(4, wire.DTInt64)
		if err != nil {
			return err
		}
		if known {
			g.shape = shape
		}
		return a.applySparse(tensor.View[int64](step.Data)[0], g)
	}, nil
}

// buildTakeGradient builds the take ops, which wait for their gradients
// until the step ends.
func buildTakeGradient(sparse bool) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dt := n.typeOf("dtype")
		return func(c *Context) error {
			a, err := accumulatorOf(c, dt, sparse)
			if err != nil {
				return err
			}
			need, err := scalarInput(c, 1, wire.DTInt32, "Argument num_required")
			if err != nil {
				return err
			}
			r, err := a.take(c.Ctx, int(tensor.View[int32](need.Data)[0]))
			if err != nil {
				return err
			}
			if !sparse {
				c.setOut(0, r.values)
				return nil
			}
			c.setOut(0, r.indices)
			c.setOut(1, r.values)
			c.setOut(2, r.shape)
			return nil
		}, nil
	}
}

func buildSetGlobalStep(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		a, err := inputResource[*accumulator](c, 0, accumulatorWhat)
		if err != nil {
			return err
		}
		step, err := scalarInput(c, 1, wire.DTInt64, "Argument new_global_step")
		if err != nil {
			return err
		}
		a.setGlobalStep(tensor.View[int64](step.Data)[0])
		return nil
	}, nil
}

func buildNumAccumulated(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		a, err := inputResource[*accumulator](c, 0, accumulatorWhat)
		if err != nil {
			return err
		}
		r, _ := tensor.New(wire.DTInt32, nil)
		tensor.View[int32](r.Data)[0] = int32(a.numAccumulated())
		c.setOut(0, r)
		return nil
	}, nil
}
