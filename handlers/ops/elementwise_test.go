package ops_test

import (
	"math"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

func TestCastAndArithmetic(t *testing.T) {
	f, d, i32, i64 := wire.DTFloat, wire.DTDouble, wire.DTInt32, wire.DTInt64
	cast := func(src, dst wire.DataType) map[string]*tfpb.AttrValue { return Attrs("SrcT", src, "DstT", dst) }
	runCases(t, []opCase{
		// static_cast: toward zero.
		{"Cast float to int32", []*tfpb.NodeDef{ConstF32("x", []int64{4}, 1.9, -1.9, 0.5, 3), NodeDef("out", "Cast", In("x"), cast(f, i32))},
			[]string{"out"}, []wire.Tensor{I32([]int64{4}, 1, -1, 0, 3)}},
		{"Cast int64 to int32 keeps low bits", []*tfpb.NodeDef{ConstI64("x", []int64{2}, 1<<32+5, -1), NodeDef("out", "Cast", In("x"), cast(i64, i32))},
			[]string{"out"}, []wire.Tensor{I32([]int64{2}, 5, -1)}},
		{"Cast int32 to double", []*tfpb.NodeDef{ConstI32("x", []int64{2}, -3, 7), NodeDef("out", "Cast", In("x"), cast(i32, d))},
			[]string{"out"}, []wire.Tensor{F64([]int64{2}, -3, 7)}},
		{"Cast float to bool and back", []*tfpb.NodeDef{ConstF32("x", []int64{3}, 0, -2, 0.1), NodeDef("b", "Cast", In("x"), cast(f, wire.DTBool)), NodeDef("out", "Cast", In("b"), cast(wire.DTBool, f))},
			[]string{"b", "out"}, []wire.Tensor{Bools([]int64{3}, false, true, true), F32([]int64{3}, 0, 1, 1)}},
		{"Cast to itself", []*tfpb.NodeDef{ConstI64("x", []int64{1}, 4), NodeDef("out", "Cast", In("x"), cast(i64, i64))},
			[]string{"out"}, []wire.Tensor{I64([]int64{1}, 4)}},
		// Python's // and %: toward negative infinity, the divisor's sign.
		{"FloorDiv int", []*tfpb.NodeDef{ConstI64("a", []int64{4}, 7, -7, 7, -7), ConstI64("b", []int64{4}, 2, 2, -2, -2), NodeDef("out", "FloorDiv", In("a", "b"), Attrs("T", i64))},
			[]string{"out"}, []wire.Tensor{I64([]int64{4}, 3, -4, -4, 3)}},
		{"FloorMod int", []*tfpb.NodeDef{ConstI64("a", []int64{4}, 7, -7, 7, -7), ConstI64("b", []int64{4}, 3, 3, -3, -3), NodeDef("out", "FloorMod", In("a", "b"), Attrs("T", i64))},
			[]string{"out"}, []wire.Tensor{I64([]int64{4}, 1, 2, -2, -1)}},
		{"FloorDiv and FloorMod float", []*tfpb.NodeDef{ConstF32("a", []int64{2}, 7.5, -7.5), ConstF32("b", nil, 2), NodeDef("out", "FloorDiv", In("a", "b"), Attrs("T", f)), NodeDef("mod", "FloorMod", In("a", "b"), Attrs("T", f))},
			[]string{"out", "mod"}, []wire.Tensor{F32([]int64{2}, 3, -4), F32([]int64{2}, 1.5, 0.5)}},
		{"Minimum broadcast", []*tfpb.NodeDef{ConstI32("a", []int64{3}, 1, 5, -2), ConstI32("b", nil, 2), NodeDef("out", "Minimum", In("a", "b"), Attrs("T", i32))},
			[]string{"out"}, []wire.Tensor{I32([]int64{3}, 1, 2, -2)}},
		{"Sqrt and Rsqrt", []*tfpb.NodeDef{ConstF32("a", []int64{2}, 4, 0.25), NodeDef("out", "Sqrt", In("a"), Attrs("T", f)), NodeDef("r", "Rsqrt", In("a"), Attrs("T", f))},
			[]string{"out", "r"}, []wire.Tensor{F32([]int64{2}, 2, 0.5), F32([]int64{2}, 0.5, 2)}},
		{"Range", []*tfpb.NodeDef{ConstI32("s", nil, 3), ConstI32("l", nil, 18), ConstI32("d", nil, 5), NodeDef("out", "Range", In("s", "l", "d"), Attrs("Tidx", i32))},
			[]string{"out"}, []wire.Tensor{I32([]int64{3}, 3, 8, 13)}},
		{"Range down, float", []*tfpb.NodeDef{ConstF32("s", nil, 1), ConstF32("l", nil, 0), ConstF32("d", nil, -0.25), NodeDef("out", "Range", In("s", "l", "d"), Attrs("Tidx", f))},
			[]string{"out"}, []wire.Tensor{F32([]int64{4}, 1, 0.75, 0.5, 0.25)}},
		{"Size", []*tfpb.NodeDef{ConstF32("x", []int64{2, 3}), NodeDef("out", "Size", In("x"), Attrs("T", f)), NodeDef("s64", "Size", In("x"), Attrs("T", f, "out_type", i64))},
			[]string{"out", "s64"}, []wire.Tensor{I32(nil, 6), I64(nil, 6)}},
		{"IdentityN", []*tfpb.NodeDef{ConstF32("x", nil, 1), ConstI64("y", []int64{1}, 2), NodeDef("out", "IdentityN", In("x", "y"), Attrs("T", []wire.DataType{f, i64}))},
			[]string{"out:0", "out:1"}, []wire.Tensor{F32(nil, 1), I64([]int64{1}, 2)}},
	})
	runErrCases(t, []errCase{
		{"FloorDiv by zero", []*tfpb.NodeDef{ConstI32("a", []int64{2}, 1, 2), ConstI32("b", []int64{2}, 1, 0), NodeDef("out", "FloorDiv", In("a", "b"), Attrs("T", i32))}, wire.InvalidArgument, "integer division by zero"},
		{"Cast of the wrong input", []*tfpb.NodeDef{ConstF32("x", nil, 1), NodeDef("out", "Cast", In("x"), cast(i32, f))}, wire.InvalidArgument, "input 0 is float, want int32"},
		{"Range with zero delta", []*tfpb.NodeDef{ConstI32("s", nil, 0), ConstI32("l", nil, 1), ConstI32("d", nil, 0), NodeDef("out", "Range", In("s", "l", "d"), Attrs("Tidx", i32))}, wire.InvalidArgument, "delta must not be 0"},
	})
}

// TestRandomInitializers checks what TensorFlow documents: uniform values
// in [0, 1), normal ones of mean 0 and deviation 1, truncated ones within
// two deviations (of deviation 0.88 then); the same seeds give the same
// values in a new graph, and a node's runs differ.
func TestRandomInitializers(t *testing.T) {
	const n = 20000
	f := wire.DTFloat
	graph := func(op string, seed int) *tfpb.GraphDef {
		return GraphDef(ConstI32("shape", []int64{2}, 100, n/100), NodeDef("out", op, In("shape"), Attrs("dtype", f, "T", wire.DTInt32, "seed", seed, "seed2", 3)))
	}
	for _, tc := range []struct {
		op                string
		lo, hi, mean, dev float64
	}{
		{"RandomUniform", 0, 1, 0.5, math.Sqrt(1.0 / 12)},
		{"RandomStandardNormal", math.Inf(-1), math.Inf(1), 0, 1},
		{"TruncatedNormal", -2, 2, 0, 0.8796},
	} {
		t.Run(tc.op, func(t *testing.T) {
			env := NewEnv(t)
			out, err := Run(t, env, graph(tc.op, 1), nil, "out")
			if err != nil {
				t.Fatal(err)
			}
			if out[0].DType != f || len(out[0].Shape) != 2 || out[0].Shape[0] != 100 {
				t.Fatalf("got %v%v", out[0].DType, out[0].Shape)
			}
			v := tensor.View[float32](out[0].Data)
			var sum, sq float64
			for _, x := range v {
				if float64(x) < tc.lo || float64(x) >= tc.hi && tc.hi != 2 || float64(x) > tc.hi {
					t.Fatalf("value %v outside [%v, %v)", x, tc.lo, tc.hi)
				}
				sum += float64(x)
				sq += float64(x) * float64(x)
			}
			mean := sum / n
			dev := math.Sqrt(sq/n - mean*mean)
			// Five standard errors.
			if math.Abs(mean-tc.mean) > 5*tc.dev/math.Sqrt(n) || math.Abs(dev-tc.dev) > 0.03 {
				t.Fatalf("mean %.4f, deviation %.4f; want %.4f, %.4f", mean, dev, tc.mean, tc.dev)
			}
			again, err := Run(t, NewEnv(t), graph(tc.op, 1), nil, "out")
			if err != nil {
				t.Fatal(err)
			}
			if string(again[0].Data) != string(out[0].Data) {
				t.Fatal("the same seeds gave different values in a new graph")
			}
			other, err := Run(t, NewEnv(t), graph(tc.op, 2), nil, "out")
			if err != nil {
				t.Fatal(err)
			}
			if string(other[0].Data) == string(out[0].Data) {
				t.Fatal("different seeds gave the same values")
			}
		})
	}
	runErrCases(t, []errCase{
		{"negative dimension", []*tfpb.NodeDef{ConstI32("shape", []int64{1}, -1), NodeDef("out", "RandomUniform", In("shape"), Attrs("dtype", f, "T", wire.DTInt32))}, wire.InvalidArgument, "negative dimension"},
	})
}

// TestVariableInitOps runs what an initializer graph does: test whether
// variables are initialized, initialize them, and add to them.
func TestVariableInitOps(t *testing.T) {
	f := wire.DTFloat
	runCases(t, []opCase{
		{"VarIsInitializedOp", []*tfpb.NodeDef{
			NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2})),
			NodeDef("before", "VarIsInitializedOp", In("v"), nil),
			ConstF32("one", []int64{2}, 1),
			NodeDef("init", "AssignVariableOp", In("v", "one", "^before"), Attrs("dtype", f)),
			NodeDef("after", "VarIsInitializedOp", In("v", "^init"), nil),
		}, []string{"before", "after"}, []wire.Tensor{Bools(nil, false), Bools(nil, true)}},
		{"IsVariableInitialized, AssignAdd, AssignSub", []*tfpb.NodeDef{
			NodeDef("v", "VariableV2", nil, Attrs("dtype", f, "shape", []int64{2})),
			NodeDef("before", "IsVariableInitialized", In("v"), Attrs("dtype", f)),
			ConstF32("x", []int64{2}, 1, 2),
			NodeDef("init", "Assign", In("v", "x", "^before"), Attrs("T", f)),
			NodeDef("add", "AssignAdd", In("init", "x"), Attrs("T", f)),
			ConstF32("half", []int64{2}, 0.5),
			NodeDef("out", "AssignSub", In("add", "half"), Attrs("T", f)),
			NodeDef("after", "IsVariableInitialized", In("v", "^out"), Attrs("dtype", f)),
		}, []string{"before", "out", "after"}, []wire.Tensor{Bools(nil, false), F32([]int64{2}, 1.5, 3.5), Bools(nil, true)}},
	})
	runErrCases(t, []errCase{
		{"AssignAdd uninitialized", []*tfpb.NodeDef{NodeDef("v", "VariableV2", nil, Attrs("dtype", f, "shape", []int64{2})), ConstF32("x", []int64{2}),
			NodeDef("out", "AssignAdd", In("v", "x"), Attrs("T", f))}, wire.FailedPrecondition, "uninitialized"},
		{"AssignAdd shape", []*tfpb.NodeDef{NodeDef("v", "VariableV2", nil, Attrs("dtype", f, "shape", []int64{2})), ConstF32("x", []int64{2}), ConstF32("y", []int64{3}),
			NodeDef("init", "Assign", In("v", "x"), Attrs("T", f)), NodeDef("out", "AssignAdd", In("init", "y"), Attrs("T", f))}, wire.InvalidArgument, "update float[3] of variable"},
		{"VarIsInitializedOp of a tensor", []*tfpb.NodeDef{ConstF32("x", []int64{2}), NodeDef("out", "VarIsInitializedOp", In("x"), nil)}, wire.InvalidArgument, "not a resource handle"},
	})
}

// TestDivStrategy runs embedding_lookup's "div" placement of ids on the
// shards of a variable of 10 rows cut in 3 by fixed_size_partitioner
// (rows 0-3, 4-6, 7-9): ids_per_partition = 3, extras = 1,
// p = max(id // 4, (id - 1) // 3), and the row within the shard is id % 4
// on the first (extras) shards, (id - 1) % 3 on the others.
func TestDivStrategy(t *testing.T) {
	i64 := wire.DTInt64
	op := func(name, kind string, a, b string) *tfpb.NodeDef {
		return NodeDef(name, kind, In(a, b), Attrs("T", i64))
	}
	runCases(t, []opCase{{"div strategy", []*tfpb.NodeDef{
		ConstI64("ids", []int64{10}, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
		ConstI64("ipp1", nil, 4), ConstI64("ipp", nil, 3), ConstI64("extras", nil, 1), ConstI64("one", nil, 1),
		op("a", "FloorDiv", "ids", "ipp1"),
		op("shifted", "Sub", "ids", "extras"),
		op("b", "FloorDiv", "shifted", "ipp"),
		op("p", "Maximum", "a", "b"),
		op("first", "Less", "p", "extras"),
		NodeDef("first/i", "Cast", In("first"), Attrs("SrcT", wire.DTBool, "DstT", i64)),
		op("in_first", "FloorMod", "ids", "ipp1"),
		op("in_rest", "FloorMod", "shifted", "ipp"),
		op("x", "Mul", "first/i", "in_first"),
		op("rest", "Sub", "one", "first/i"),
		op("y", "Mul", "rest", "in_rest"),
		op("out", "AddV2", "x", "y"),
	}, []string{"p", "first", "out"}, []wire.Tensor{
		I64([]int64{10}, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2),
		Bools([]int64{10}, true, true, true, true, false, false, false, false, false, false),
		I64([]int64{10}, 0, 1, 2, 3, 0, 1, 2, 0, 1, 2),
	}}, {"comparisons broadcast", []*tfpb.NodeDef{
		ConstF32("a", []int64{2, 2}, 1, 2, 3, 4), ConstF32("b", []int64{2}, 2, 3),
		NodeDef("out", "GreaterEqual", In("a", "b"), Attrs("T", wire.DTFloat)),
		NodeDef("eq", "Equal", In("a", "b"), Attrs("T", wire.DTFloat)),
		NodeDef("le", "LessEqual", In("b", "a"), Attrs("T", wire.DTFloat)),
	}, []string{"out", "eq", "le"}, []wire.Tensor{
		Bools([]int64{2, 2}, false, false, true, true),
		Bools([]int64{2, 2}, false, false, false, false),
		Bools([]int64{2, 2}, false, false, true, true),
	}}})
}
