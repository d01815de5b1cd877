package ops_test

import (
	"fmt"
	"maps"
	"testing"

	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// A kernelCase is one op run on fixed inputs, for BenchmarkKernels.
type kernelCase struct {
	name   string
	op     string
	attrs  map[string]*tfpb.AttrValue
	inputs []wire.Tensor
}

// benchTensor is a tensor of dt and shape in memory of its own, holding
// small positive values so that Log, Sqrt and division stay finite.
func benchTensor(dt wire.DataType, shape ...int64) wire.Tensor {
	n, _ := tensor.NumElements(shape)
	t := tensor.Owned(dt, shape, int(n)*dt.Size())
	for i := range int(n) {
		v := i%7 + 1
		switch dt {
		case wire.DTFloat:
			tensor.View[float32](t.Data)[i] = float32(v)
		case wire.DTDouble:
			tensor.View[float64](t.Data)[i] = float64(v)
		case wire.DTInt32:
			tensor.View[int32](t.Data)[i] = int32(v)
		case wire.DTInt64:
			tensor.View[int64](t.Data)[i] = int64(v)
		}
	}
	return t
}

// scalar is a 0-d tensor of dt holding v.
func scalar(dt wire.DataType, v int) wire.Tensor {
	t := benchTensor(dt)
	switch dt {
	case wire.DTFloat:
		tensor.View[float32](t.Data)[0] = float32(v)
	case wire.DTInt32:
		tensor.View[int32](t.Data)[0] = int32(v)
	case wire.DTInt64:
		tensor.View[int64](t.Data)[0] = int64(v)
	}
	return t
}

func typeAttrs(kv ...any) map[string]*tfpb.AttrValue {
	m := map[string]*tfpb.AttrValue{}
	for i := 0; i < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case wire.DataType:
			m[kv[i].(string)] = &tfpb.AttrValue{Value: &tfpb.AttrValue_Type{Type: tfpb.DataType(v)}}
		case bool:
			m[kv[i].(string)] = &tfpb.AttrValue{Value: &tfpb.AttrValue_B{B: v}}
		}
	}
	return m
}

// kernelCases are the arithmetic kernels a training step spends its time
// in, for float32 and int64: every per-dtype dispatch of the op kernels
// runs in at least one of them.
func kernelCases() []kernelCase {
	const rows, cols = 128, 128
	var cases []kernelCase
	for _, dt := range []wire.DataType{wire.DTFloat, wire.DTInt64} {
		m, row := benchTensor(dt, rows, cols), benchTensor(dt, cols)
		t := typeAttrs("T", dt)
		cases = append(cases,
			kernelCase{"Add", "AddV2", t, []wire.Tensor{m, m}},
			kernelCase{"AddRow", "AddV2", t, []wire.Tensor{m, row}},
			kernelCase{"FloorMod", "FloorMod", t, []wire.Tensor{m, row}},
			kernelCase{"Neg", "Neg", t, []wire.Tensor{m}},
			kernelCase{"Sum", "Sum", typeAttrs("T", dt, "Tidx", wire.DTInt32, "keep_dims", false), []wire.Tensor{m, scalar(wire.DTInt32, 1)}},
			kernelCase{"MatMul", "MatMul", typeAttrs("T", dt, "transpose_a", false, "transpose_b", false), []wire.Tensor{benchTensor(dt, 64, 64), benchTensor(dt, 64, 64)}},
			kernelCase{"Less", "Less", t, []wire.Tensor{m, row}},
			kernelCase{"Cast", "Cast", typeAttrs("SrcT", dt, "DstT", wire.DTInt32, "Truncate", false), []wire.Tensor{m}},
			kernelCase{"UnsortedSegmentSum", "UnsortedSegmentSum", typeAttrs("T", dt, "Tindices", wire.DTInt32, "Tnumsegments", wire.DTInt32),
				[]wire.Tensor{m, benchTensor(wire.DTInt32, rows), scalar(wire.DTInt32, 8)}},
			kernelCase{"Range", "Range", typeAttrs("Tidx", dt), []wire.Tensor{scalar(dt, 0), scalar(dt, rows*cols), scalar(dt, 1)}},
		)
		for i := range cases[len(cases)-10:] {
			cases[len(cases)-10+i].name += "/" + dt.String()
		}
	}
	f := benchTensor(wire.DTFloat, rows, cols)
	cases = append(cases, kernelCase{"Sigmoid/float", "Sigmoid", typeAttrs("T", wire.DTFloat), []wire.Tensor{f}})
	return cases
}

// BenchmarkKernels runs single op kernels on 128×128 inputs (64×64 for
// MatMul), built and called as the executor does, without a graph around
// them; bytes are those of the inputs.
func BenchmarkKernels(b *testing.B) {
	for _, kc := range kernelCases() {
		b.Run(kc.name, func(b *testing.B) {
			k, c := buildKernel(b, kc)
			var nbytes int64
			for _, t := range kc.inputs {
				nbytes += int64(len(t.Data))
			}
			b.SetBytes(nbytes)
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Run(k); err != nil {
					b.Fatal(err)
				}
				for i := range c.Out {
					c.Out[i].T.Buf.Release()
					c.Out[i] = ops.Value{}
				}
			}
		})
	}
}

// buildKernel builds kc's kernel and a context holding its inputs.
func buildKernel(b *testing.B, kc kernelCase) (ops.Kernel, *ops.Context) {
	spec := ops.Lookup(kc.op)
	if spec == nil {
		b.Fatalf("op %s not registered", kc.op)
	}
	attrs := maps.Clone(spec.Defaults)
	if attrs == nil {
		attrs = map[string]*tfpb.AttrValue{}
	}
	maps.Copy(attrs, kc.attrs)
	n := &ops.Node{Name: "k", Op: kc.op, Attrs: attrs, NumInputs: len(kc.inputs)}
	k, err := spec.Kernel(&ops.Env{}, n)
	if err != nil {
		b.Fatal(fmt.Errorf("build %s: %w", kc.name, err))
	}
	c := &ops.Context{Ctx: b.Context(), Out: make([]ops.Value, n.NumOutputs)}
	for _, t := range kc.inputs {
		c.In = append(c.In, ops.Value{T: t, Set: true})
	}
	return k, c
}
