package handlers

import (
	"fmt"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	varDefaults := map[string]*tfpb.AttrValue{"container": stringAttr(""), "shared_name": stringAttr("")}
	registerOp("VarHandleOp", &opSpec{defaults: withDefaults(varDefaults, map[string]*tfpb.AttrValue{"allowed_devices": {Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{}}}}), build: buildVariable(false)})
	registerOp("VariableV2", &opSpec{defaults: varDefaults, build: buildVariable(true)})
	registerOp("ReadVariableOp", &opSpec{build: buildReadVariable})
	registerOp("Assign", &opSpec{defaults: map[string]*tfpb.AttrValue{"validate_shape": boolAttr(true), "use_locking": boolAttr(true)}, build: buildAssign})
	registerOp("AssignVariableOp", &opSpec{defaults: map[string]*tfpb.AttrValue{"validate_shape": boolAttr(false)}, build: buildAssignVariable})
	registerOp("AssignAddVariableOp", &opSpec{build: buildAssignUpdate(addOp)})
	registerOp("AssignSubVariableOp", &opSpec{build: buildAssignUpdate(subOp)})
	gd := map[string]*tfpb.AttrValue{"use_locking": boolAttr(false)}
	registerOp("ApplyGradientDescent", &opSpec{defaults: gd, build: buildApplyGradientDescent(true)})
	registerOp("ResourceApplyGradientDescent", &opSpec{defaults: gd, build: buildApplyGradientDescent(false)})
}

// withDefaults merges default tables.
func withDefaults(tables ...map[string]*tfpb.AttrValue) map[string]*tfpb.AttrValue {
	out := make(map[string]*tfpb.AttrValue)
	for _, t := range tables {
		for k, v := range t {
			out[k] = v
		}
	}
	return out
}

// buildVariable builds VarHandleOp (a resource handle) and VariableV2 (a
// ref). An empty shared_name means the node's name, as in graph mode.
func buildVariable(ref bool) func(*Worker, *node) (kernel, error) {
	return func(w *Worker, n *node) (kernel, error) {
		if err := n.wantInputs(0); err != nil {
			return nil, err
		}
		dt, err := n.attrType("dtype")
		if err != nil {
			return nil, err
		}
		if dt.Size() == 0 {
			return nil, fmt.Errorf("variables of %v are not supported", dt)
		}
		if _, err := n.attrShape("shape"); err != nil {
			return nil, err
		}
		container, err := n.attrString("container")
		if err != nil {
			return nil, err
		}
		shared, err := n.attrString("shared_name")
		if err != nil {
			return nil, err
		}
		if shared == "" {
			shared = n.name
		}
		n.nouts = 1
		return func(c *opCtx) error {
			v, err := c.s.w.vars.lookup(container, shared, dt)
			if err != nil {
				return err
			}
			c.out[0] = value{v: v, isRef: ref, set: true, t: wire.Tensor{DType: dt}}
			return nil
		}, nil
	}
}

func buildReadVariable(_ *Worker, n *node) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	dt, err := n.attrType("dtype")
	if err != nil {
		return nil, err
	}
	n.nouts = 1
	return func(c *opCtx) error {
		v, err := c.resource(0)
		if err != nil {
			return err
		}
		if err := v.checkDType(dt); err != nil {
			return err
		}
		t, err := v.read()
		if err != nil {
			return err
		}
		c.setOut(0, t)
		return nil
	}, nil
}

// buildAssign builds Assign on a VariableV2 ref; its output is the ref.
func buildAssign(_ *Worker, n *node) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	if _, err := n.attrType("T"); err != nil {
		return nil, err
	}
	validate, err := n.attrBool("validate_shape")
	if err != nil {
		return nil, err
	}
	n.nouts = 1
	return func(c *opCtx) error {
		if !c.in[0].isRef {
			return rpc.Errorf(wire.InvalidArgument, "input 0 is not a variable ref")
		}
		t, err := c.input(1)
		if err != nil {
			return err
		}
		if err := c.in[0].v.assign(t, validate); err != nil {
			return err
		}
		c.out[0] = c.in[0]
		return nil
	}, nil
}

func buildAssignVariable(_ *Worker, n *node) (kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	if _, err := n.attrType("dtype"); err != nil {
		return nil, err
	}
	validate, err := n.attrBool("validate_shape")
	if err != nil {
		return nil, err
	}
	return func(c *opCtx) error {
		v, t, err := c.variableAndInput()
		if err != nil {
			return err
		}
		return v.assign(t, validate)
	}, nil
}

// buildAssignUpdate builds AssignAddVariableOp and AssignSubVariableOp.
func buildAssignUpdate(op binaryKind) func(*Worker, *node) (kernel, error) {
	return func(_ *Worker, n *node) (kernel, error) {
		if err := n.wantInputs(2); err != nil {
			return nil, err
		}
		if _, err := n.attrTypeIn("dtype", numericTypes...); err != nil {
			return nil, err
		}
		return func(c *opCtx) error {
			v, d, err := c.variableAndInput()
			if err != nil {
				return err
			}
			return v.update(func(t *wire.Tensor) error {
				if d.DType != t.DType || !sameShape(d.Shape, t.Shape) {
					return rpc.Errorf(wire.InvalidArgument, "update %v%v of variable %s of %v%v", d.DType, d.Shape, v.name, t.DType, t.Shape)
				}
				return elementwise(op, t, t, d)
			})
		}, nil
	}
}

// buildApplyGradientDescent builds ApplyGradientDescent (on a ref, which
// is its output) and ResourceApplyGradientDescent: var -= alpha * delta.
func buildApplyGradientDescent(ref bool) func(*Worker, *node) (kernel, error) {
	return func(_ *Worker, n *node) (kernel, error) {
		if _, err := n.wantSignature(3, floatTypes...); err != nil {
			return nil, err
		}
		if ref {
			n.nouts = 1
		}
		return func(c *opCtx) error {
			if c.in[0].v == nil || c.in[0].isRef != ref {
				return rpc.Errorf(wire.InvalidArgument, "input 0 is not a variable %s", map[bool]string{true: "ref", false: "handle"}[ref])
			}
			v := c.in[0].v
			alpha, err := c.input(1)
			if err != nil {
				return err
			}
			delta, err := c.input(2)
			if err != nil {
				return err
			}
			if len(alpha.Shape) != 0 || alpha.DType != v.dtype {
				return rpc.Errorf(wire.InvalidArgument, "alpha must be a %v scalar, is %v%v", v.dtype, alpha.DType, alpha.Shape)
			}
			err = v.update(func(t *wire.Tensor) error {
				if delta.DType != t.DType || !sameShape(delta.Shape, t.Shape) {
					return rpc.Errorf(wire.InvalidArgument, "delta %v%v for variable %s of %v%v", delta.DType, delta.Shape, v.name, t.DType, t.Shape)
				}
				switch t.DType {
				case wire.DTFloat:
					axpy(View[float32](t.Data), -View[float32](alpha.Data)[0], View[float32](delta.Data))
				case wire.DTDouble:
					axpy(View[float64](t.Data), -View[float64](alpha.Data)[0], View[float64](delta.Data))
				}
				return nil
			})
			if err != nil {
				return err
			}
			if ref {
				c.out[0] = c.in[0]
			}
			return nil
		}, nil
	}
}

// axpy computes y += a*x.
func axpy[T float32 | float64](y []T, a T, x []T) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}
