package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	varDefaults := map[string]*tfpb.AttrValue{"container": stringAttr(""), "shared_name": stringAttr("")}
	// A variable holds fixed-size elements: string variables are not
	// supported.
	variable := []TypeAttr{fixedSize("dtype")}
	registerOp("VarHandleOp", &Spec{Defaults: withDefaults(varDefaults, map[string]*tfpb.AttrValue{"allowed_devices": {Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{}}}}),
		Inputs: exactly(0), Types: variable, NumOutputs: exactly(1), Build: buildVariable(false)})
	registerOp("VariableV2", &Spec{Defaults: varDefaults, Inputs: exactly(0), Types: variable, NumOutputs: exactly(1), Build: buildVariable(true)})
	dtype := []TypeAttr{anyType("dtype")}
	registerOp("ReadVariableOp", &Spec{Inputs: exactly(1), Types: dtype, NumOutputs: exactly(1), Build: buildReadVariable})
	registerOp("Assign", &Spec{Defaults: map[string]*tfpb.AttrValue{"validate_shape": boolAttr(true), "use_locking": boolAttr(true)},
		Inputs: exactly(2), Types: []TypeAttr{anyType("T")}, NumOutputs: exactly(1), Build: buildAssign})
	registerOp("AssignVariableOp", &Spec{Defaults: map[string]*tfpb.AttrValue{"validate_shape": boolAttr(false)},
		Inputs: exactly(2), Types: dtype, NumOutputs: exactly(0), Build: buildAssignVariable})
	numericDType := []TypeAttr{typeIn("dtype", numericTypes...)}
	registerOp("AssignAddVariableOp", &Spec{Inputs: exactly(2), Types: numericDType, NumOutputs: exactly(0), Build: buildAssignUpdate(addOp)})
	registerOp("AssignSubVariableOp", &Spec{Inputs: exactly(2), Types: numericDType, NumOutputs: exactly(0), Build: buildAssignUpdate(subOp)})
	refUpdate := map[string]*tfpb.AttrValue{"use_locking": boolAttr(false)}
	numeric := []TypeAttr{typeIn("T", numericTypes...)}
	registerOp("AssignAdd", &Spec{Defaults: refUpdate, Inputs: exactly(2), Types: numeric, NumOutputs: exactly(1), Build: buildRefUpdate(addOp)})
	registerOp("AssignSub", &Spec{Defaults: refUpdate, Inputs: exactly(2), Types: numeric, NumOutputs: exactly(1), Build: buildRefUpdate(subOp)})
	registerOp("VarIsInitializedOp", &Spec{Inputs: exactly(1), NumOutputs: exactly(1), Build: buildIsInitialized(false)})
	registerOp("IsVariableInitialized", &Spec{Inputs: exactly(1), Types: dtype, NumOutputs: exactly(1), Build: buildIsInitialized(true)})
	gd := map[string]*tfpb.AttrValue{"use_locking": boolAttr(false)}
	descent := []TypeAttr{descentByDType.attr("T")}
	registerOp("ApplyGradientDescent", &Spec{Defaults: gd, Inputs: exactly(3), Types: descent, NumOutputs: exactly(1), Build: buildApplyGradientDescent(true)})
	registerOp("ResourceApplyGradientDescent", &Spec{Defaults: gd, Inputs: exactly(3), Types: descent, NumOutputs: exactly(0), Build: buildApplyGradientDescent(false)})
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
func buildVariable(ref bool) func(*Env, *Node) (Kernel, error) {
	return func(env *Env, n *Node) (Kernel, error) {
		dt := n.typeOf("dtype")
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
			shared = n.Name
		}
		return func(c *Context) error {
			v, err := env.Vars.lookup(container, shared, dt)
			if err != nil {
				return err
			}
			c.Out[0] = Value{T: wire.Tensor{DType: dt}, Set: true, v: v, isRef: ref}
			return nil
		}, nil
	}
}

func buildReadVariable(_ *Env, n *Node) (Kernel, error) {
	dt := n.typeOf("dtype")
	return func(c *Context) error {
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
func buildAssign(_ *Env, n *Node) (Kernel, error) {
	validate, err := n.attrBool("validate_shape")
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		if !c.In[0].isRef {
			return status.Errorf(wire.InvalidArgument, "input 0 is not a variable ref")
		}
		t, err := c.input(1)
		if err != nil {
			return err
		}
		if err := c.In[0].v.assign(t, validate); err != nil {
			return err
		}
		c.Out[0] = c.In[0]
		return nil
	}, nil
}

func buildAssignVariable(_ *Env, n *Node) (Kernel, error) {
	validate, err := n.attrBool("validate_shape")
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		v, t, err := c.variableAndInput()
		if err != nil {
			return err
		}
		return v.assign(t, validate)
	}, nil
}

// buildAssignUpdate builds AssignAddVariableOp and AssignSubVariableOp.
func buildAssignUpdate(op binaryKind) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		return func(c *Context) error {
			v, d, err := c.variableAndInput()
			if err != nil {
				return err
			}
			return v.update(func(t *wire.Tensor) error {
				if d.DType != t.DType || !sameShape(d.Shape, t.Shape) {
					return status.Errorf(wire.InvalidArgument, "update %v%v of variable %s of %v%v", d.DType, d.Shape, v.name, t.DType, t.Shape)
				}
				return elementwise(op, t, t, d)
			})
		}, nil
	}
}

// buildApplyGradientDescent builds ApplyGradientDescent (on a ref, which
// is its output) and ResourceApplyGradientDescent: var -= alpha * delta.
func buildApplyGradientDescent(ref bool) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		return func(c *Context) error {
			if c.In[0].v == nil || c.In[0].isRef != ref {
				return status.Errorf(wire.InvalidArgument, "input 0 is not a variable %s", map[bool]string{true: "ref", false: "handle"}[ref])
			}
			v := c.In[0].v
			alpha, err := c.input(1)
			if err != nil {
				return err
			}
			delta, err := c.input(2)
			if err != nil {
				return err
			}
			if len(alpha.Shape) != 0 || alpha.DType != v.dtype {
				return status.Errorf(wire.InvalidArgument, "alpha must be a %v scalar, is %v%v", v.dtype, alpha.DType, alpha.Shape)
			}
			err = v.update(func(t *wire.Tensor) error {
				if delta.DType != t.DType || !sameShape(delta.Shape, t.Shape) {
					return status.Errorf(wire.InvalidArgument, "delta %v%v for variable %s of %v%v", delta.DType, delta.Shape, v.name, t.DType, t.Shape)
				}
				run, err := descentByDType.forTensor("gradient descent", t.DType)
				if err != nil {
					return err
				}
				run(*t, *alpha, *delta)
				return nil
			})
			if err != nil {
				return err
			}
			if ref {
				c.Out[0] = c.In[0]
			}
			return nil
		}, nil
	}
}

// descendTensors computes y -= alpha*x on tensors of element type T;
// alpha is a scalar.
func descendTensors[T floating](y, alpha, x wire.Tensor) {
	axpy(tensor.View[T](y.Data), -tensor.View[T](alpha.Data)[0], tensor.View[T](x.Data))
}

var descentByDType = floatTable(descendTensors[float32], descendTensors[float64])

// axpy computes y += a*x.
func axpy[T floating](y []T, a T, x []T) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// buildRefUpdate builds AssignAdd and AssignSub on a VariableV2 ref; the
// output is the ref.
func buildRefUpdate(op binaryKind) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		return func(c *Context) error {
			if !c.In[0].isRef {
				return status.Errorf(wire.InvalidArgument, "input 0 is not a variable ref")
			}
			v := c.In[0].v
			d, err := c.input(1)
			if err != nil {
				return err
			}
			err = v.update(func(t *wire.Tensor) error {
				if d.DType != t.DType || !sameShape(d.Shape, t.Shape) {
					return status.Errorf(wire.InvalidArgument, "update %v%v of variable %s of %v%v", d.DType, d.Shape, v.name, t.DType, t.Shape)
				}
				return elementwise(op, t, t, d)
			})
			if err != nil {
				return err
			}
			c.Out[0] = c.In[0]
			return nil
		}, nil
	}
}

// buildIsInitialized builds VarIsInitializedOp (of a resource handle) and
// IsVariableInitialized (of a ref): a bool scalar, which initializer graphs
// read to skip variables a restored checkpoint or another worker set.
func buildIsInitialized(ref bool) func(*Env, *Node) (Kernel, error) {
	return func(*Env, *Node) (Kernel, error) {
		return func(c *Context) error {
			in := c.In[0]
			if in.v == nil || in.isRef != ref {
				return status.Errorf(wire.InvalidArgument, "input 0 is not a %s", map[bool]string{true: "variable ref", false: "resource handle"}[ref])
			}
			in.v.mu.RLock()
			init := in.v.init
			in.v.mu.RUnlock()
			r, _ := tensor.New(wire.DTBool, nil)
			r.Data[0] = 0
			if init {
				r.Data[0] = 1
			}
			c.setOut(0, r)
			return nil
		}, nil
	}
}
