package ops

import (
	"slices"

	"github.com/starwire/starwire/handlers/embedding"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	registerOp("KvResourceSparseApplyAdam", &Spec{
		Defaults: map[string]*tfpb.AttrValue{"use_locking": boolAttr(false), "apply_weight_decay": boolAttr(false)},
		// DeepRec's newer graphs add weight_decay.
		Inputs: exactly(12).orUpTo(1), Types: kvUpdateTypes, NumOutputs: exactly(0), Build: buildKvSparseApplyAdam,
	})
}

// buildKvSparseApplyAdam builds KvResourceSparseApplyAdam(var, m, v,
// beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
// global_step[, weight_decay]): Adam on the rows of indices, m and v
// being slots of var kept beside each row (a row made on first lookup
// starts them at their initial value, and a checkpoint saves them with
// it), each row's version becoming global_step. Gradients of ids not
// admitted are dropped. DeepRec's newer graphs add weight_decay, which
// only apply_weight_decay uses; that is not supported.
func buildKvSparseApplyAdam(_ *Env, n *Node) (Kernel, error) {
	if decay, err := n.attrBool("apply_weight_decay"); err != nil || decay {
		return nil, orUnimplemented(err, "apply_weight_decay is not supported")
	}
	keyType, stepType := n.typeOf("Tindices"), n.typeOf("Tstep")
	return func(c *Context) error {
		t, mSlot, vSlot, v, err := adamSlots(c)
		if err != nil {
			return err
		}
		if err := v.wantKeys(keyType); err != nil {
			return err
		}
		var in [10]*wire.Tensor
		for i := range in {
			dt := wire.DTFloat
			switch i {
			case 7:
				dt = keyType
			case 8:
				dt = stepType
			case 9:
				if n.NumInputs == 12 {
					continue
				}
			}
			if in[i], err = c.typed(3+i, dt); err != nil {
				return err
			}
		}
		var p embedding.AdamParams
		for i, dst := range []*float32{&p.Beta1Power, &p.Beta2Power, &p.LR, &p.Beta1, &p.Beta2, &p.Epsilon} {
			if len(in[i].Shape) != 0 {
				return status.Errorf(wire.InvalidArgument, "input %d of Adam must be a scalar, is %v", 3+i, tfShape(in[i].Shape))
			}
			*dst = tensor.View[float32](in[i].Data)[0]
		}
		grad, ids, step := in[6], in[7], in[8]
		if len(step.Shape) != 0 {
			return status.Errorf(wire.InvalidArgument, "global_step must be a scalar, is %v", tfShape(step.Shape))
		}
		if len(ids.Shape) != 1 || !slices.Equal(grad.Shape, []int64{ids.Shape[0], int64(v.dim)}) {
			return status.Errorf(wire.InvalidArgument, "embedding variable %s: grad %v for indices %v, want [%d,%d]", v.name, tfShape(grad.Shape), tfShape(ids.Shape), ids.Shape[0], v.dim)
		}
		gs, _ := indices(step)
		if _, err := t.ApplyAdam(mSlot, vSlot, kvIDs(ids), tensor.View[float32](grad.Data), p, gs[0]); err != nil {
			return status.Errorf(wire.InvalidArgument, "embedding variable %s: %v", v.name, err)
		}
		return nil
	}, nil
}

// adamSlots returns the table of input 0's variable and the slots of it
// inputs 1 and 2 are.
func adamSlots(c *Context) (t *embedding.Table, m, vs int, v *kvVar, err error) {
	var vars [3]*kvVar
	for i := range vars {
		if vars[i], err = c.kvVarInput(i); err != nil {
			return nil, 0, 0, nil, err
		}
	}
	v = vars[0]
	if t, _, err = v.kvTable(); err != nil {
		return nil, 0, 0, nil, err
	}
	var slots [2]int
	for i, s := range vars[1:] {
		st, slot, err := s.kvTable()
		if err != nil {
			return nil, 0, 0, nil, err
		}
		if st != t || slot < 0 {
			return nil, 0, 0, nil, status.Errorf(wire.InvalidArgument, "Adam's %s %s is not a slot of embedding variable %s", [2]string{"m", "v"}[i], s.name, v.name)
		}
		slots[i] = slot
	}
	if slots[0] == slots[1] {
		return nil, 0, 0, nil, status.Errorf(wire.InvalidArgument, "Adam's m and v of embedding variable %s are one slot, %s", v.name, vars[1].name)
	}
	return t, slots[0], slots[1], v, nil
}

// orUnimplemented returns err, or an Unimplemented error saying what.
func orUnimplemented(err error, what string) error {
	if err != nil {
		return err
	}
	return status.Errorf(wire.Unimplemented, "%s", what)
}
