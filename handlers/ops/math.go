package ops

import (
	"math"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	for name, op := range map[string]binaryKind{"Add": addOp, "AddV2": addOp, "Sub": subOp, "Mul": mulOp, "RealDiv": divOp, "Maximum": maxOp,
		"Minimum": minOp, "FloorDiv": floorDivOp, "FloorMod": floorModOp} {
		registerOp(name, &Spec{Inputs: exactly(2), Types: []TypeAttr{binaryTable(op).attr("T")}, NumOutputs: exactly(1), Build: buildBinary(op)})
	}
	for name, op := range map[string]unaryKind{"Neg": negOp, "Sigmoid": sigmoidOp, "Log": logOp, "Exp": expOp, "Square": squareOp, "Log1p": log1pOp,
		"Sqrt": sqrtOp, "Rsqrt": rsqrtOp} {
		registerOp(name, &Spec{Inputs: exactly(1), Types: []TypeAttr{unaryTable(op).attr("T")}, NumOutputs: exactly(1), Build: buildUnary(op)})
	}
	registerOp("SigmoidGrad", &Spec{Inputs: exactly(2), Types: []TypeAttr{sigmoidGradByDType.attr("T")}, NumOutputs: exactly(1), Build: buildSigmoidGrad})
	red := map[string]*tfpb.AttrValue{"keep_dims": boolAttr(false), "Tidx": typeAttr(wire.DTInt32)}
	reduce := []TypeAttr{reduceByDType.attr("T"), typeIn("Tidx", indexTypes...)}
	registerOp("Sum", &Spec{Defaults: red, Inputs: exactly(2), Types: reduce, NumOutputs: exactly(1), Build: buildReduce(false)})
	registerOp("Mean", &Spec{Defaults: red, Inputs: exactly(2), Types: reduce, NumOutputs: exactly(1), Build: buildReduce(true)})
	registerOp("MatMul", &Spec{Defaults: map[string]*tfpb.AttrValue{"transpose_a": boolAttr(false), "transpose_b": boolAttr(false)},
		Inputs: exactly(2), Types: []TypeAttr{matMulByDType.attr("T")}, NumOutputs: exactly(1), Build: buildMatMul})
}

type binaryKind int

const (
	addOp binaryKind = iota
	subOp
	mulOp
	divOp
	maxOp
	sigmoidGradOp // dy·y·(1-y) of y and dy, for SigmoidGrad
	minOp
	floorDivOp // the quotient rounded down, as Python's //
	floorModOp // the remainder with the divisor's sign, as Python's %
)

// binaryTensors is broadcastBinary on tensors of element type T: r has
// the broadcast shape out of a's and b's.
func binaryTensors[T numeric](op binaryKind, r, a, b wire.Tensor, out []int64) {
	broadcastBinary(op, tensor.View[T](r.Data), out, tensor.View[T](a.Data), a.Shape, tensor.View[T](b.Data), b.Shape)
}

var binaryByDType = numericTable(binaryTensors[float32], binaryTensors[float64], binaryTensors[int32], binaryTensors[int64])

// binaryTable is the code of op for the types it supports: real division
// has no integer form.
func binaryTable(op binaryKind) byDType[func(binaryKind, wire.Tensor, wire.Tensor, wire.Tensor, []int64)] {
	if op == divOp {
		return binaryByDType.floats()
	}
	return binaryByDType
}

// intZeroByDType finds a zero divisor, which FloorDiv and FloorMod refuse
// for integers; floats divide by zero into infinities.
var intZeroByDType = indexTable(hasZero[int32], hasZero[int64])

func buildBinary(op binaryKind) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dt, run := binaryTable(op).of(n, "T")
		var zeroDivisor func(wire.Tensor) bool
		if op == floorDivOp || op == floorModOp {
			zeroDivisor, _ = intZeroByDType.lookup(dt)
		}
		return func(c *Context) error {
			var in [2]*wire.Tensor
			if err := c.typedInputs(dt, in[:]); err != nil {
				return err
			}
			a, b := in[0], in[1]
			out, err := broadcastShape(a.Shape, b.Shape)
			if err != nil {
				return err
			}
			if zeroDivisor != nil && zeroDivisor(*b) {
				return status.Errorf(wire.InvalidArgument, "integer division by zero")
			}
			r, err := tensor.New(dt, out)
			if err != nil {
				return err
			}
			run(op, r, *a, *b, out)
			c.setOut(0, r)
			return nil
		}, nil
	}
}

// broadcastShape returns the shape of a binary op's result under NumPy
// broadcasting.
func broadcastShape(a, b []int64) ([]int64, error) {
	rank := max(len(a), len(b))
	out := make([]int64, rank)
	for i := range out {
		da, db := int64(1), int64(1)
		if j := i - (rank - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (rank - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, status.Errorf(wire.InvalidArgument, "incompatible shapes %v and %v", a, b)
		}
	}
	return out, nil
}

// broadcastStrides returns the element strides of shape aligned to the
// rank of out, zero along broadcast dimensions.
func broadcastStrides(shape, out []int64) []int64 {
	strides := make([]int64, len(out))
	s := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		j := i + len(out) - len(shape)
		if shape[i] != 1 {
			strides[j] = s
		}
		s *= shape[i]
	}
	return strides
}

// broadcastBinary computes r = a op b under broadcasting. It walks the
// result in runs along its last dimension, where each operand either moves
// by one element or stays (a broadcast dimension), so the inner loop is a
// plain loop the compiler can optimize, with the op chosen outside it.
func broadcastBinary[T numeric](op binaryKind, r []T, out []int64, a []T, as []int64, b []T, bs []int64) {
	switch {
	case len(a) == len(r) && len(b) == len(r):
		binaryRun(op, r, a, 1, b, 1)
		return
	case len(b) == 1 && len(a) == len(r):
		binaryRun(op, r, a, 1, b, 0)
		return
	case len(a) == 1 && len(b) == len(r):
		binaryRun(op, r, a, 0, b, 1)
		return
	case len(r) == 0:
		return
	}
	sa, sb := broadcastStrides(as, out), broadcastStrides(bs, out)
	last := len(out) - 1
	inner := int(out[last])
	outer := out[:last]
	idx := make([]int64, len(outer))
	var ia, ib int64
	for o := 0; o < len(r); o += inner {
		binaryRun(op, r[o:o+inner], a[ia:], int(sa[last]), b[ib:], int(sb[last]))
		for d := len(outer) - 1; d >= 0; d-- {
			idx[d]++
			ia += sa[d]
			ib += sb[d]
			if idx[d] < outer[d] {
				break
			}
			ia -= sa[d] * outer[d]
			ib -= sb[d] * outer[d]
			idx[d] = 0
		}
	}
}

// binaryRun computes r[i] = a[i·da] op b[i·db], with da and db 0 or 1.
func binaryRun[T numeric](op binaryKind, r, a []T, da int, b []T, db int) {
	if len(r) > 0 && binaryFast(op, r, a, da, b, db) {
		return
	}
	switch op {
	case addOp:
		for i := range r {
			r[i] = a[i*da] + b[i*db]
		}
	case subOp:
		for i := range r {
			r[i] = a[i*da] - b[i*db]
		}
	case mulOp:
		for i := range r {
			r[i] = a[i*da] * b[i*db]
		}
	case divOp:
		for i := range r {
			r[i] = a[i*da] / b[i*db]
		}
	case maxOp:
		for i := range r {
			r[i] = max(a[i*da], b[i*db])
		}
	case sigmoidGradOp:
		for i := range r {
			y := a[i*da]
			r[i] = b[i*db] * y * (1 - y)
		}
	case minOp:
		for i := range r {
			r[i] = min(a[i*da], b[i*db])
		}
	case floorDivOp:
		for i := range r {
			r[i] = floorDiv(a[i*da], b[i*db])
		}
	case floorModOp:
		for i := range r {
			r[i] = floorMod(a[i*da], b[i*db])
		}
	}
}

// isFloat reports whether T is a floating-point type.
func isFloat[T numeric]() bool { return T(1)/T(2) != 0 }

// floorDiv is a / b rounded toward negative infinity; b is not an integer
// zero (the kernel checks).
func floorDiv[T numeric](a, b T) T {
	if isFloat[T]() {
		return T(math.Floor(float64(a) / float64(b)))
	}
	q := a / b
	if (a-q*b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// floorMod is a - floorDiv(a, b)·b: the remainder takes b's sign.
func floorMod[T numeric](a, b T) T {
	var r T
	if isFloat[T]() {
		r = T(math.Mod(float64(a), float64(b)))
	} else {
		r = a - (a/b)*b
	}
	if r != 0 && ((r < 0) != (b < 0)) {
		r += b
	}
	return r
}

// hasZero reports whether a tensor of element type T holds a zero.
func hasZero[T numeric](t wire.Tensor) bool {
	for _, x := range tensor.View[T](t.Data) {
		if x == 0 {
			return true
		}
	}
	return false
}

// elementwiseTensors is binaryRun on whole tensors of element type T.
func elementwiseTensors[T numeric](op binaryKind, r, a, b wire.Tensor) {
	binaryRun(op, tensor.View[T](r.Data), tensor.View[T](a.Data), 1, tensor.View[T](b.Data), 1)
}

var elementwiseByDType = numericTable(elementwiseTensors[float32], elementwiseTensors[float64], elementwiseTensors[int32], elementwiseTensors[int64])

// elementwise computes r = a op b for tensors of one shape and of r's
// dtype, without broadcasting; r may be a, to update a in place.
func elementwise(op binaryKind, r, a, b *wire.Tensor) error {
	run, err := elementwiseByDType.forTensor("arithmetic", r.DType)
	if err != nil {
		return err
	}
	run(op, *r, *a, *b)
	return nil
}

type unaryKind int

const (
	negOp unaryKind = iota
	sigmoidOp
	logOp
	expOp
	squareOp
	log1pOp
	sqrtOp
	rsqrtOp
)

func unaryFunc[T floating](op unaryKind) func(T) T {
	switch op {
	case negOp:
		return func(x T) T { return -x }
	case sigmoidOp:
		return func(x T) T { return T(1 / (1 + math.Exp(-float64(x)))) }
	case logOp:
		return func(x T) T { return T(math.Log(float64(x))) }
	case expOp:
		return func(x T) T { return T(math.Exp(float64(x))) }
	case squareOp:
		return func(x T) T { return x * x }
	case sqrtOp:
		return func(x T) T { return T(math.Sqrt(float64(x))) }
	case rsqrtOp:
		return func(x T) T { return T(1 / math.Sqrt(float64(x))) }
	default:
		return func(x T) T { return T(math.Log1p(float64(x))) }
	}
}

// unaryTensors returns the code of op on tensors of a float type T.
func unaryTensors[T floating](op unaryKind) func(r, a wire.Tensor) {
	f := unaryFunc[T](op)
	return func(r, a wire.Tensor) { mapInto(tensor.View[T](r.Data), tensor.View[T](a.Data), f) }
}

// intUnaryTensors is unaryTensors for the integer ops (Neg, Square).
func intUnaryTensors[T int32 | int64](op unaryKind) func(r, a wire.Tensor) {
	f := intUnary[T](op)
	return func(r, a wire.Tensor) { mapInto(tensor.View[T](r.Data), tensor.View[T](a.Data), f) }
}

var unaryByDType = numericTable(unaryTensors[float32], unaryTensors[float64], intUnaryTensors[int32], intUnaryTensors[int64])

// unaryTable is the code of op for the types it supports: only Neg and
// Square have integer forms.
func unaryTable(op unaryKind) byDType[func(unaryKind) func(r, a wire.Tensor)] {
	if op != negOp && op != squareOp {
		return unaryByDType.floats()
	}
	return unaryByDType
}

func buildUnary(op unaryKind) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dt, code := unaryTable(op).of(n, "T")
		run := code(op)
		return func(c *Context) error {
			a, err := c.typed(0, dt)
			if err != nil {
				return err
			}
			r, err := tensor.New(dt, a.Shape)
			if err != nil {
				return err
			}
			run(r, *a)
			c.setOut(0, r)
			return nil
		}, nil
	}
}

// intUnary is unaryFunc for the integer ops (Neg, Square).
func intUnary[T int32 | int64](op unaryKind) func(T) T {
	if op == negOp {
		return func(x T) T { return -x }
	}
	return func(x T) T { return x * x }
}

func mapInto[T numeric](r, a []T, f func(T) T) {
	a = a[:len(r)]
	for i := range r {
		r[i] = f(a[i])
	}
}

// sigmoidGradByDType is the arithmetic SigmoidGrad runs, on real numbers.
var sigmoidGradByDType = elementwiseByDType.floats()

// buildSigmoidGrad builds SigmoidGrad(y, dy) = dy * y * (1 - y).
func buildSigmoidGrad(_ *Env, n *Node) (Kernel, error) {
	dt, run := sigmoidGradByDType.of(n, "T")
	return func(c *Context) error {
		var in [2]*wire.Tensor
		if err := c.typedInputs(dt, in[:]); err != nil {
			return err
		}
		y, dy := in[0], in[1]
		if !sameShape(y.Shape, dy.Shape) {
			return status.Errorf(wire.InvalidArgument, "y%v and dy%v differ in shape", y.Shape, dy.Shape)
		}
		r, err := tensor.New(dt, y.Shape)
		if err != nil {
			return err
		}
		run(sigmoidGradOp, r, *y, *dy)
		c.setOut(0, r)
		return nil
	}, nil
}

// reduceTensors is reduceSum on tensors of element type T.
func reduceTensors[T numeric](r, a wire.Tensor, kept []int64, mean bool, count float64) {
	reduceSum(tensor.View[T](r.Data), tensor.View[T](a.Data), a.Shape, kept, mean, count)
}

var reduceByDType = numericTable(reduceTensors[float32], reduceTensors[float64], reduceTensors[int32], reduceTensors[int64])

// buildReduce builds Sum and Mean over the axes given by input 1.
func buildReduce(mean bool) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dt, run := reduceByDType.of(n, "T")
		keep, err := n.attrBool("keep_dims")
		if err != nil {
			return nil, err
		}
		return func(c *Context) error {
			a, err := c.typed(0, dt)
			if err != nil {
				return err
			}
			at, err := c.input(1)
			if err != nil {
				return err
			}
			outShape, keptShape, err := reducedShapes(a.Shape, at, keep)
			if err != nil {
				return err
			}
			r, err := tensor.New(dt, outShape)
			if err != nil {
				return err
			}
			clear(r.Data)
			in, _ := a.NumElements()
			out, _ := r.NumElements()
			count := float64(1)
			if out > 0 {
				count = float64(in / out)
			}
			run(r, *a, keptShape, mean, count)
			c.setOut(0, r)
			return nil
		}, nil
	}
}

// reducedShapes returns the shape of a reduction of shape over the axes
// tensor at: out drops the reduced dimensions unless keep, kept sets them
// to 1.
func reducedShapes(shape []int64, at *wire.Tensor, keep bool) (out, kept []int64, err error) {
	axes, err := indices(at)
	if err != nil || len(at.Shape) > 1 {
		return nil, nil, status.Errorf(wire.InvalidArgument, "reduction indices must be an int scalar or vector, are %v%v", at.DType, at.Shape)
	}
	reduced := make([]bool, len(shape))
	for _, ax := range axes {
		if ax < 0 {
			ax += int64(len(shape))
		}
		if ax < 0 || ax >= int64(len(shape)) {
			return nil, nil, status.Errorf(wire.InvalidArgument, "reduction axis %d out of range for rank %d", ax, len(shape))
		}
		reduced[ax] = true
	}
	for i, d := range shape {
		if reduced[i] {
			kept = append(kept, 1)
			if keep {
				out = append(out, 1)
			}
			continue
		}
		kept = append(kept, d)
		out = append(out, d)
	}
	return out, kept, nil
}

// binaryFast is binaryRun for the arithmetic a step spends its time in
// (adding, subtracting and multiplying whole runs, or a run and a scalar,
// as a broadcast row does), in loops without index arithmetic or bounds
// checks. It reports false for the ops it leaves to binaryRun.
func binaryFast[T numeric](op binaryKind, r, a []T, da int, b []T, db int) bool {
	if op != addOp && op != subOp && op != mulOp {
		return false
	}
	n := len(r)
	switch {
	case da == 1 && db == 1:
		a, b := a[:n], b[:n]
		switch op {
		case addOp:
			for i := range r {
				r[i] = a[i] + b[i]
			}
		case subOp:
			for i := range r {
				r[i] = a[i] - b[i]
			}
		case mulOp:
			for i := range r {
				r[i] = a[i] * b[i]
			}
		}
	case da == 1 && db == 0:
		a, y := a[:n], b[0]
		switch op {
		case addOp:
			for i := range r {
				r[i] = a[i] + y
			}
		case subOp:
			for i := range r {
				r[i] = a[i] - y
			}
		case mulOp:
			for i := range r {
				r[i] = a[i] * y
			}
		}
	case da == 0 && db == 1:
		x, b := a[0], b[:n]
		switch op {
		case addOp:
			for i := range r {
				r[i] = x + b[i]
			}
		case subOp:
			for i := range r {
				r[i] = x - b[i]
			}
		case mulOp:
			for i := range r {
				r[i] = x * b[i]
			}
		}
	default:
		return false
	}
	return true
}

// sumRun adds up a run of elements. A long run is summed in four
// interleaved partial sums, added pairwise at the end, as TensorFlow's
// vectorized reductions sum in lanes: four additions in flight instead of
// one chain, each waiting for the last. A run shorter than sumLanes is
// summed in order.
func sumRun[T numeric](run []T) T {
	if len(run) < sumLanes {
		var sum T
		for _, x := range run {
			sum += x
		}
		return sum
	}
	var s0, s1, s2, s3 T
	i := 0
	for ; i+4 <= len(run); i += 4 {
		q := run[i : i+4 : i+4]
		s0 += q[0]
		s1 += q[1]
		s2 += q[2]
		s3 += q[3]
	}
	for ; i < len(run); i++ {
		s0 += run[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// sumLanes is the shortest run sumRun sums in partial sums.
const sumLanes = 16

// reduceSum adds every element of a into r, whose shape is kept (a's shape
// with reduced dimensions set to 1), and divides by count for a mean. It
// walks a in runs along its last dimension: a reduced last dimension sums
// each run into one element, a kept one adds the run to a run of r.
func reduceSum[T numeric](r, a []T, shape, kept []int64, mean bool, count float64) {
	if len(a) > 0 {
		if len(shape) == 0 {
			r[0] = a[0]
		} else {
			strides := broadcastStrides(kept, shape)
			last := len(shape) - 1
			inner := int(shape[last])
			outer := shape[:last]
			idx := make([]int64, len(outer))
			var ir int64
			for o := 0; o < len(a); o += inner {
				run := a[o : o+inner]
				if strides[last] == 0 {
					r[ir] += sumRun(run)
				} else {
					dst := r[ir : int(ir)+inner]
					for i, x := range run {
						dst[i] += x
					}
				}
				for d := len(outer) - 1; d >= 0; d-- {
					idx[d]++
					ir += strides[d]
					if idx[d] < outer[d] {
						break
					}
					ir -= strides[d] * outer[d]
					idx[d] = 0
				}
			}
		}
	}
	if mean {
		for i := range r {
			r[i] = T(float64(r[i]) / count)
		}
	}
}

// matMulTensors is matMul on tensors of element type T.
func matMulTensors[T numeric](r, a, b wire.Tensor, d matDims) {
	matMul(tensor.View[T](r.Data), tensor.View[T](a.Data), tensor.View[T](b.Data), d)
}

var matMulByDType = numericTable(matMulTensors[float32], matMulTensors[float64], matMulTensors[int32], matMulTensors[int64])

func buildMatMul(_ *Env, n *Node) (Kernel, error) {
	dt, run := matMulByDType.of(n, "T")
	ta, err := n.attrBool("transpose_a")
	if err != nil {
		return nil, err
	}
	tb, err := n.attrBool("transpose_b")
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		var in [2]*wire.Tensor
		if err := c.typedInputs(dt, in[:]); err != nil {
			return err
		}
		a, b := in[0], in[1]
		dims, err := matMulDims(a.Shape, b.Shape, ta, tb)
		if err != nil {
			return err
		}
		r, err := tensor.New(dt, []int64{int64(dims.m), int64(dims.n)})
		if err != nil {
			return err
		}
		clear(r.Data)
		run(r, *a, *b, dims)
		c.setOut(0, r)
		return nil
	}, nil
}

// matMulDims checks that op(a)·op(b) is defined for shapes as and bs and
// returns its dimensions.
func matMulDims(as, bs []int64, ta, tb bool) (matDims, error) {
	if len(as) != 2 || len(bs) != 2 {
		return matDims{}, status.Errorf(wire.InvalidArgument, "MatMul of shapes %v and %v: both must be matrices", as, bs)
	}
	m, k := as[0], as[1]
	if ta {
		m, k = k, m
	}
	k2, nn := bs[0], bs[1]
	if tb {
		k2, nn = nn, k2
	}
	if k != k2 {
		return matDims{}, status.Errorf(wire.InvalidArgument, "MatMul of shapes %v and %v (transpose %v, %v): inner dimensions %d and %d differ", as, bs, ta, tb, k, k2)
	}
	return matDims{m: int(m), k: int(k), n: int(nn), ta: ta, tb: tb}, nil
}

type matDims struct {
	m, k, n int
	ta, tb  bool
}

// matMul computes r[m×n] += op(a)[m×k] · op(b)[k×n], looping i, p, j so
// that the inner loop walks rows of r and of b when b is not transposed.
func matMul[T numeric](r, a, b []T, d matDims) {
	at := func(i, p int) T {
		if d.ta {
			return a[p*d.m+i]
		}
		return a[i*d.k+p]
	}
	for i := 0; i < d.m; i++ {
		row := r[i*d.n : (i+1)*d.n]
		for p := 0; p < d.k; p++ {
			x := at(i, p)
			if x == 0 {
				continue
			}
			if !d.tb {
				brow := b[p*d.n : (p+1)*d.n]
				for j := range row {
					row[j] += x * brow[j]
				}
				continue
			}
			for j := range row {
				row[j] += x * b[j*d.k+p]
			}
		}
	}
}
