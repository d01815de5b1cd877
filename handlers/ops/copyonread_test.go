package ops_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestDisableCopyOnRead runs the read TensorFlow 2's save function makes
// of each variable: DisableCopyOnRead on the handle, then a read that
// waits for it.
func TestDisableCopyOnRead(t *testing.T) {
	f := wire.DTFloat
	runCases(t, []opCase{
		{"then read", []*tfpb.NodeDef{
			NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2}, "shared_name", "a")),
			ConstF32("x", []int64{2}, 0.5, 3),
			NodeDef("init", "AssignVariableOp", In("v", "x"), Attrs("dtype", f)),
			NodeDef("off", "DisableCopyOnRead", In("v", "^init"), nil),
			NodeDef("read", "ReadVariableOp", In("v", "^off"), Attrs("dtype", f)),
		}, []string{"read"}, []wire.Tensor{F32([]int64{2}, 0.5, 3)}},
	})
	runErrCases(t, []errCase{
		{"of a tensor", []*tfpb.NodeDef{ConstF32("x", nil, 1), NodeDef("out", "DisableCopyOnRead", In("x"), nil)}, wire.InvalidArgument, "not a variable"},
		{"without input", []*tfpb.NodeDef{NodeDef("out", "DisableCopyOnRead", nil, nil)}, wire.InvalidArgument, "has 0 data inputs, want 1"},
	})
}

func TestPackStrings(t *testing.T) {
	str := wire.DTString
	runCases(t, []opCase{
		// The shard prefixes MergeV2Checkpoints takes.
		{"scalars", []*tfpb.NodeDef{ConstStr("a", nil, "ckpt_temp/part-00000-of-00002"), ConstStr("b", nil, "ckpt_temp/part-00001-of-00002"),
			NodeDef("out", "Pack", In("a", "b"), Attrs("N", 2, "T", str))},
			[]string{"out"}, []wire.Tensor{stringsOf([]int64{2}, "ckpt_temp/part-00000-of-00002", "ckpt_temp/part-00001-of-00002")}},
		{"one", []*tfpb.NodeDef{ConstStr("a", nil, "p"), NodeDef("out", "Pack", In("a"), Attrs("N", 1, "T", str))},
			[]string{"out"}, []wire.Tensor{stringsOf([]int64{1}, "p")}},
		{"vectors along axis 1", []*tfpb.NodeDef{ConstStr("a", []int64{2}, "a0", "a1"), ConstStr("b", []int64{2}, "b0", ""),
			NodeDef("out", "Pack", In("a", "b"), Attrs("N", 2, "T", str, "axis", 1))},
			[]string{"out"}, []wire.Tensor{stringsOf([]int64{2, 2}, "a0", "b0", "a1", "")}},
		{"vectors along axis -2", []*tfpb.NodeDef{ConstStr("a", []int64{2}, "a0", "a1"), ConstStr("b", []int64{2}, "b0", "b1"),
			NodeDef("out", "Pack", In("a", "b"), Attrs("N", 2, "T", str, "axis", -2))},
			[]string{"out"}, []wire.Tensor{stringsOf([]int64{2, 2}, "a0", "a1", "b0", "b1")}},
	})
	runErrCases(t, []errCase{
		{"shapes differ", []*tfpb.NodeDef{ConstStr("a", nil, "x"), ConstStr("b", []int64{1}, "y"), NodeDef("out", "Pack", In("a", "b"), Attrs("N", 2, "T", str))},
			wire.InvalidArgument, "input 1 has shape [1], input 0 has []"},
		{"axis out of range", []*tfpb.NodeDef{ConstStr("a", nil, "x"), NodeDef("out", "Pack", In("a"), Attrs("N", 1, "T", str, "axis", 2))},
			wire.InvalidArgument, "axis 2 is out of range"},
		{"a float among strings", []*tfpb.NodeDef{ConstStr("a", nil, "x"), ConstF32("b", nil, 1), NodeDef("out", "Pack", In("a", "b"), Attrs("N", 2, "T", str))},
			wire.InvalidArgument, "input 1 is float, want string"},
	})
}
