package ops_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

func TestSelect(t *testing.T) {
	f, i32, i64, str := wire.DTFloat, wire.DTInt32, wire.DTInt64, wire.DTString
	sel := func(op string, dt wire.DataType) *tfpb.NodeDef {
		return NodeDef("out", op, In("c", "t", "e"), Attrs("T", dt))
	}
	cases := []opCase{
		// TensorFlow 2's save function: a scalar condition between two
		// string scalars, through Select and SelectV2.
		{"Select string scalars", []*tfpb.NodeDef{constBools("c", nil, false), ConstStr("t", nil, ".part"), ConstStr("e", nil, "_temp/part"), sel("Select", str)},
			[]string{"out"}, []wire.Tensor{stringsOf(nil, "_temp/part")}},
		{"SelectV2 string scalars", []*tfpb.NodeDef{constBools("c", nil, true), ConstStr("t", nil, ".part"), ConstStr("e", nil, "_temp/part"), sel("SelectV2", str)},
			[]string{"out"}, []wire.Tensor{stringsOf(nil, ".part")}},
		{"Select elementwise float", []*tfpb.NodeDef{constBools("c", []int64{2, 2}, true, false, false, true), ConstF32("t", []int64{2, 2}, 1, 2, 3, 4), ConstF32("e", []int64{2, 2}, -1, -2, -3, -4), sel("Select", f)},
			[]string{"out"}, []wire.Tensor{F32([]int64{2, 2}, 1, -2, -3, 4)}},
		{"Select scalar condition picks a whole tensor", []*tfpb.NodeDef{constBools("c", nil, true), ConstI64("t", []int64{3}, 1, 2, 3), ConstI64("e", []int64{3}, 4, 5, 6), sel("Select", i64)},
			[]string{"out"}, []wire.Tensor{I64([]int64{3}, 1, 2, 3)}},
		{"Select vector condition picks rows", []*tfpb.NodeDef{constBools("c", []int64{2}, false, true), ConstI32("t", []int64{2, 3}, 1, 2, 3, 4, 5, 6), ConstI32("e", []int64{2, 3}, 7, 8, 9, 10, 11, 12), sel("Select", i32)},
			[]string{"out"}, []wire.Tensor{I32([]int64{2, 3}, 7, 8, 9, 4, 5, 6)}},
		{"Select strings elementwise", []*tfpb.NodeDef{constBools("c", []int64{3}, true, false, true), ConstStr("t", []int64{3}, "a", "bb", ""), ConstStr("e", []int64{3}, "x", "", "zzz"), sel("Select", str)},
			[]string{"out"}, []wire.Tensor{stringsOf([]int64{3}, "a", "", "")}},
		{"Select bools", []*tfpb.NodeDef{constBools("c", []int64{2}, true, false), constBools("t", []int64{2}, false, false), constBools("e", []int64{2}, true, true), sel("Select", wire.DTBool)},
			[]string{"out"}, []wire.Tensor{Bools([]int64{2}, false, true)}},
		// SelectV2 broadcasts all three: [2,1] × [1,3] × [] → [2,3].
		{"SelectV2 broadcast int64", []*tfpb.NodeDef{constBools("c", []int64{2, 1}, true, false), ConstI64("t", []int64{1, 3}, 1, 2, 3), ConstI64("e", nil, 0), sel("SelectV2", i64)},
			[]string{"out"}, []wire.Tensor{I64([]int64{2, 3}, 1, 2, 3, 0, 0, 0)}},
		{"SelectV2 broadcast condition", []*tfpb.NodeDef{constBools("c", []int64{3}, false, true, false), ConstF32("t", []int64{2, 3}, 1, 2, 3, 4, 5, 6), ConstF32("e", []int64{2, 1}, -1, -2), sel("SelectV2", f)},
			[]string{"out"}, []wire.Tensor{F32([]int64{2, 3}, -1, 2, -1, -2, 5, -2)}},
		{"SelectV2 broadcast strings", []*tfpb.NodeDef{constBools("c", []int64{2, 2}, true, false, false, true), ConstStr("t", []int64{2}, "t0", "t1"), ConstStr("e", []int64{2, 1}, "e0", "e1"), sel("SelectV2", str)},
			[]string{"out"}, []wire.Tensor{stringsOf([]int64{2, 2}, "t0", "e0", "e1", "t1")}},
		{"SelectV2 double", []*tfpb.NodeDef{constBools("c", []int64{2}, false, true), NodeDef("t", "Cast", In("tf"), Attrs("SrcT", f, "DstT", wire.DTDouble)), ConstF32("tf", []int64{2}, 1.5, 2.5),
			NodeDef("e", "Cast", In("ef"), Attrs("SrcT", f, "DstT", wire.DTDouble)), ConstF32("ef", nil, 9), sel("SelectV2", wire.DTDouble)},
			[]string{"out"}, []wire.Tensor{F64([]int64{2}, 9, 2.5)}},
		{"SelectV2 empty", []*tfpb.NodeDef{constBools("c", []int64{0}), ConstI32("t", []int64{0}), ConstI32("e", nil, 1), sel("SelectV2", i32)},
			[]string{"out"}, []wire.Tensor{I32([]int64{0})}},
	}
	runCases(t, cases)
	runErrCases(t, []errCase{
		{"Select then and else shapes differ", []*tfpb.NodeDef{constBools("c", nil, true), ConstF32("t", []int64{2}, 1, 2), ConstF32("e", []int64{3}, 1, 2, 3), sel("Select", f)},
			wire.InvalidArgument, "'then' and 'else' must have the same shape"},
		{"Select does not broadcast then and else", []*tfpb.NodeDef{constBools("c", nil, true), ConstF32("t", []int64{2}, 1, 2), ConstF32("e", nil, 1), sel("Select", f)},
			wire.InvalidArgument, "'then' and 'else' must have the same shape"},
		{"Select condition of a bad shape", []*tfpb.NodeDef{constBools("c", []int64{3}, true, true, true), ConstF32("t", []int64{2, 2}, 1, 2, 3, 4), ConstF32("e", []int64{2, 2}, 1, 2, 3, 4), sel("Select", f)},
			wire.InvalidArgument, "condition of shape [3]"},
		{"Select vector condition of a vector", []*tfpb.NodeDef{constBools("c", []int64{1}, true), ConstF32("t", []int64{2}, 1, 2), ConstF32("e", []int64{2}, 1, 2), sel("Select", f)},
			wire.InvalidArgument, "condition of shape [1]"},
		{"SelectV2 incompatible then and else", []*tfpb.NodeDef{constBools("c", nil, true), ConstI32("t", []int64{2}, 1, 2), ConstI32("e", []int64{3}, 1, 2, 3), sel("SelectV2", i32)},
			wire.InvalidArgument, "then and else: incompatible shapes [2] and [3]"},
		{"SelectV2 incompatible condition", []*tfpb.NodeDef{constBools("c", []int64{4}, true, true, true, true), ConstI32("t", []int64{2}, 1, 2), ConstI32("e", nil, 1), sel("SelectV2", i32)},
			wire.InvalidArgument, "condition: incompatible shapes [4] and [2]"},
		{"condition not bool", []*tfpb.NodeDef{ConstI32("c", nil, 1), ConstF32("t", nil, 1), ConstF32("e", nil, 2), sel("SelectV2", f)},
			wire.InvalidArgument, "input 0 is int32, want bool"},
		{"then of another dtype", []*tfpb.NodeDef{constBools("c", nil, true), ConstF32("t", nil, 1), ConstStr("e", nil, "x"), sel("SelectV2", f)},
			wire.InvalidArgument, "input 2 is string, want float"},
		{"resource dtype", []*tfpb.NodeDef{constBools("c", nil, true), ConstF32("t", nil, 1), ConstF32("e", nil, 2), sel("SelectV2", wire.DTResource)},
			wire.InvalidArgument, `attr "T" is resource`},
	})
}
