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
