package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// Segments: Unique (the distinct ids of a batch, and where each id went)
// and UnsortedSegmentSum (rows added up by segment), with which a worker
// looks each id up once and sums the gradients of its repeats.

func init() {
	registerOp("Unique", &Spec{Defaults: map[string]*tfpb.AttrValue{"out_idx": typeAttr(wire.DTInt32)},
		Inputs: exactly(1), Types: []TypeAttr{uniqueByDType.attr("T"), typeIn("out_idx", indexTypes...)}, Build: buildUnique, Outputs: []string{"y", "idx"}})
	registerOp("UnsortedSegmentSum", &Spec{Defaults: map[string]*tfpb.AttrValue{"Tnumsegments": typeAttr(wire.DTInt32)},
		Inputs: exactly(3), Types: []TypeAttr{segmentSumByDType.attr("T"), typeIn("Tindices", indexTypes...), typeIn("Tnumsegments", indexTypes...)},
		NumOutputs: exactly(1), Build: buildUnsortedSegmentSum})
}

// buildUnique builds Unique(x): y holds x's distinct elements in the order
// they first appear, and idx[i] is the position of x[i] in y.
func buildUnique(_ *Env, n *Node) (Kernel, error) {
	dt, run := uniqueByDType.of(n, "T")
	out := n.typeOf("out_idx")
	return func(c *Context) error {
		x, err := c.typed(0, dt)
		if err != nil {
			return err
		}
		if len(x.Shape) != 1 {
			return status.Errorf(wire.InvalidArgument, "x must be a vector, has shape %v", x.Shape)
		}
		idx, err := tensor.New(out, x.Shape)
		if err != nil {
			return err
		}
		c.setOut(1, idx)
		y, err := run(dt, *x, idx)
		if err != nil {
			return err
		}
		c.setOut(0, y)
		return nil
	}, nil
}

// uniqueTensor is unique for floats and uniqueInts for integers, on
// tensors of element type T.
func uniqueTensor[T numeric](dt wire.DataType, x, idx wire.Tensor) (wire.Tensor, error) {
	return unique(dt, tensor.View[T](x.Data), &idx)
}

func uniqueIntTensor[T int32 | int64](dt wire.DataType, x, idx wire.Tensor) (wire.Tensor, error) {
	return uniqueInts(dt, tensor.View[T](x.Data), &idx)
}

var uniqueByDType = numericTable(uniqueTensor[float32], uniqueTensor[float64], uniqueIntTensor[int32], uniqueIntTensor[int64])

func unique[T numeric](dt wire.DataType, x []T, idx *wire.Tensor) (wire.Tensor, error) {
	pos := make(map[T]int64, len(x))
	var distinct []T
	for i, v := range x {
		p, ok := pos[v]
		if !ok {
			p = int64(len(distinct))
			pos[v] = p
			distinct = append(distinct, v)
		}
		setIndex(idx, i, p)
	}
	y, err := tensor.New(dt, []int64{int64(len(distinct))})
	if err != nil {
		return wire.Tensor{}, err
	}
	copy(tensor.View[T](y.Data), distinct)
	return y, nil
}

// buildUnsortedSegmentSum builds UnsortedSegmentSum(data, segment_ids,
// num_segments): row s of the output is the sum of the rows of data whose
// id is s; negative ids are dropped, as TensorFlow drops them, and
// segments without rows are zero.
func buildUnsortedSegmentSum(_ *Env, n *Node) (Kernel, error) {
	dt, run := segmentSumByDType.of(n, "T")
	return func(c *Context) error {
		data, err := c.typed(0, dt)
		if err != nil {
			return err
		}
		it, err := c.input(1)
		if err != nil {
			return err
		}
		ids, buf, err := readIndices(it)
		if err != nil {
			return err
		}
		defer buf.release()
		nt, err := c.input(2)
		if err != nil {
			return err
		}
		ns, err := indices(nt)
		if err != nil || len(nt.Shape) != 0 || ns[0] < 0 {
			return errOr(err, "num_segments must be a non-negative int scalar, is %v%v %v", nt.DType, nt.Shape, ns)
		}
		row, err := prefixRows(data, it.Shape, "segment_ids")
		if err != nil {
			return err
		}
		for i, s := range ids {
			if s >= ns[0] {
				return status.Errorf(wire.InvalidArgument, "segment_ids[%d] = %d is not below num_segments %d", i, s, ns[0])
			}
		}
		r, err := tensor.New(dt, append([]int64{ns[0]}, data.Shape[len(it.Shape):]...))
		if err != nil {
			return err
		}
		clear(r.Data)
		run(r, *data, ids, row/dt.Size())
		c.setOut(0, r)
		return nil
	}, nil
}

// segmentSumTensors is segmentSum on tensors of element type T.
func segmentSumTensors[T numeric](r, data wire.Tensor, ids []int64, width int) {
	segmentSum(tensor.View[T](r.Data), tensor.View[T](data.Data), ids, width)
}

var segmentSumByDType = numericTable(segmentSumTensors[float32], segmentSumTensors[float64], segmentSumTensors[int32], segmentSumTensors[int64])

// segmentSum adds row i of data (rows of width elements) into row ids[i]
// of r, skipping negative ids. It adds four elements an iteration because
// the one-element loop's speed depended only on where the linker placed it,
// and the loop stays in this function because a call a row is measurably
// slower (BENCHMARKS.md, "Op kernels", BenchmarkKernels/UnsortedSegmentSum).
func segmentSum[T numeric](r, data []T, ids []int64, width int) {
	for i, s := range ids {
		if s < 0 {
			continue
		}
		dst, src := r[int(s)*width:int(s+1)*width], data[i*width:(i+1)*width]
		src = src[:len(dst)]
		j := 0
		for ; j+4 <= len(dst); j += 4 {
			d, x := dst[j:j+4:j+4], src[j:j+4:j+4]
			d[0] += x[0]
			d[1] += x[1]
			d[2] += x[2]
			d[3] += x[3]
		}
		for ; j < len(dst); j++ {
			dst[j] += src[j]
		}
	}
}
