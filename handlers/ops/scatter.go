package ops

import "github.com/starwire/starwire/wire"

func init() {
	registerOp("ResourceScatterSub", scatterSpec(subOp))
}

// scatterSpec is the Spec of ResourceScatterAdd or ResourceScatterSub.
func scatterSpec(op binaryKind) *Spec {
	return &Spec{Inputs: exactly(3), Types: []TypeAttr{typeIn("dtype", numericTypes...), typeIn("Tindices", indexTypes...)},
		NumOutputs: exactly(0), Build: buildResourceScatter(op)}
}

// buildResourceScatter builds ResourceScatterAdd and ResourceScatterSub
// (resource, indices, updates): row indices[i] of the variable becomes
// row op updates[i], duplicate indices applying in turn. TensorFlow 2's
// Variable.scatter_sub and the optimizers' sparse updates of embeddings
// make ResourceScatterSub; ResourceScatterAdd is registered in sparse.go.
func buildResourceScatter(op binaryKind) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dt := n.typeOf("dtype")
		return func(c *Context) error {
			v, it, err := c.variableAndInput()
			if err != nil {
				return err
			}
			idx, buf, err := readIndices(it)
			if err != nil {
				return err
			}
			defer buf.release()
			u, err := c.typed(2, dt)
			if err != nil {
				return err
			}
			return v.sparse(func(t *wire.Tensor) error {
				// Checked here, so that an uninitialized variable is
				// reported as such first.
				if err := v.checkDType(dt); err != nil {
					return err
				}
				l, err := scatterRows("updates", u, t, it.Shape, idx)
				if err != nil {
					return err
				}
				for i, x := range idx {
					row := &wire.Tensor{DType: dt, Data: t.Data[int(x)*l.rowBytes : int(x+1)*l.rowBytes]}
					upd := &wire.Tensor{DType: dt, Data: u.Data[i*l.rowBytes : (i+1)*l.rowBytes]}
					v.lockRow(x)
					elementwise(op, row, row, upd)
					v.unlockRow(x)
				}
				return nil
			})
		}, nil
	}
}
