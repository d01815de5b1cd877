package ops

import (
	"fmt"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// Sharded lookups: DynamicPartition splits rows among partitions (the ids
// each parameter server holds), DynamicStitch and ParallelDynamicStitch
// put rows back in their original places. They move rows as bytes, so they
// take any fixed-size dtype.

func init() {
	t := []TypeAttr{fixedSize("T")}
	registerOp("DynamicPartition", &Spec{Inputs: exactly(2), Types: t, NumOutputs: byInt("num_partitions", 1), Build: buildDynamicPartition})
	registerOp("DynamicStitch", &Spec{Inputs: byInt("N", 1).times(2), Types: t, NumOutputs: exactly(1), Build: buildDynamicStitch})
	registerOp("ParallelDynamicStitch", &Spec{Inputs: byInt("N", 1).times(2), Types: t, NumOutputs: exactly(1), Build: buildDynamicStitch})
}

// prefixRows checks that idx's shape is a prefix of data's and returns the
// bytes of the row each index of idx addresses.
func prefixRows(data *wire.Tensor, idxShape []int64, what string) (int, error) {
	if len(idxShape) > len(data.Shape) || !sameShape(data.Shape[:len(idxShape)], idxShape) {
		return 0, status.Errorf(wire.InvalidArgument, "%s shape %v is not a prefix of data shape %v", what, idxShape, data.Shape)
	}
	row := data.DType.Size()
	for _, d := range data.Shape[len(idxShape):] {
		row *= int(d)
	}
	return row, nil
}

// buildDynamicPartition builds DynamicPartition(data, partitions): output
// i holds, in order, the rows of data whose partition is i.
func buildDynamicPartition(_ *Env, n *Node) (Kernel, error) {
	dt, num := n.typeOf("T"), n.intOf("num_partitions")
	return func(c *Context) error {
		data, err := c.typed(0, dt)
		if err != nil {
			return err
		}
		pt, err := c.typed(1, wire.DTInt32)
		if err != nil {
			return err
		}
		row, err := prefixRows(data, pt.Shape, "partitions")
		if err != nil {
			return err
		}
		parts := tensor.View[int32](pt.Data)
		counts := make([]int64, num)
		for i, p := range parts {
			if p < 0 || int64(p) >= num {
				return status.Errorf(wire.InvalidArgument, "partitions[%d] = %d is not in [0, %d)", i, p, num)
			}
			counts[p]++
		}
		outs := make([][]byte, num)
		for p := range counts {
			shape := append([]int64{counts[p]}, data.Shape[len(pt.Shape):]...)
			r, err := tensor.New(dt, shape)
			if err != nil {
				return err
			}
			c.setOut(p, r)
			outs[p] = r.Data
		}
		for i, p := range parts {
			outs[p] = outs[p][copy(outs[p], data.Data[i*row:(i+1)*row]):]
		}
		return nil
	}, nil
}

// buildDynamicStitch builds DynamicStitch(indices[N], data[N]): row
// indices[m][i] of the output is data[m]'s row i; a later index wins over
// an earlier one, and rows no index names are zero.
func buildDynamicStitch(_ *Env, n *Node) (Kernel, error) {
	num, dt := n.intOf("N"), n.typeOf("T")
	return func(c *Context) error {
		N := int(num)
		idx := make([]*wire.Tensor, N)
		if err := c.typedInputs(wire.DTInt32, idx); err != nil {
			return err
		}
		data := make([]*wire.Tensor, N)
		for m := range data {
			var err error // the kernel's own: steps run it at once
			if data[m], err = c.typed(N+m, dt); err != nil {
				return err
			}
		}
		first, err := prefixRows(data[0], idx[0].Shape, "indices[0]")
		if err != nil {
			return err
		}
		rowShape := data[0].Shape[len(idx[0].Shape):]
		rows := int64(0)
		for m := range N {
			if len(data[m].Shape) < len(idx[m].Shape) || !sameShape(data[m].Shape[len(idx[m].Shape):], rowShape) {
				return status.Errorf(wire.InvalidArgument, "data[%d] has shape %v for indices of shape %v; rows of shape %v expected", m, data[m].Shape, idx[m].Shape, rowShape)
			}
			if _, err := prefixRows(data[m], idx[m].Shape, fmt.Sprintf("indices[%d]", m)); err != nil {
				return err
			}
			for i, x := range tensor.View[int32](idx[m].Data) {
				if x < 0 {
					return status.Errorf(wire.InvalidArgument, "indices[%d][%d] = %d is negative", m, i, x)
				}
				rows = max(rows, int64(x)+1)
			}
		}
		r, err := tensor.New(dt, append([]int64{rows}, rowShape...))
		if err != nil {
			return err
		}
		clear(r.Data)
		for m := range N {
			for i, x := range tensor.View[int32](idx[m].Data) {
				copy(r.Data[int(x)*first:int(x+1)*first], data[m].Data[i*first:(i+1)*first])
			}
		}
		c.setOut(0, r)
		return nil
	}, nil
}
