package ops_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// TestResourceScatterSub subtracts rows, a duplicate index twice, as
// TensorFlow does, and refuses an index outside the table.
func TestResourceScatterSub(t *testing.T) {
	env := NewEnv(t)
	f := wire.DTFloat
	out, err := Run(t, env, GraphDef(
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{3, 2})),
		ConstF32("init", []int64{3, 2}, 1, 2, 3, 4, 5, 6),
		NodeDef("assign", "AssignVariableOp", In("v", "init"), Attrs("dtype", f)),
		ConstI32("ids", []int64{3}, 2, 0, 2),
		ConstF32("upd", []int64{3, 2}, 1, 1, 0.5, 0.5, 2, 2),
		NodeDef("sub", "ResourceScatterSub", In("v", "ids", "upd", "^assign"), Attrs("dtype", f, "Tindices", wire.DTInt32)),
		NodeDef("read", "ReadVariableOp", In("v", "^sub"), Attrs("dtype", f)),
	), nil, "read")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Floats(&out[0]), []float32{0.5, 1.5, 3, 4, 2, 3}; !ApproxEqual(got, want) {
		t.Fatalf("after ResourceScatterSub: %v, want %v", got, want)
	}
	_, err = Run(t, env, GraphDef(
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{3, 2})),
		ConstI32("ids", []int64{1}, 3),
		ConstF32("upd", []int64{1, 2}, 1, 1),
		NodeDef("sub", "ResourceScatterSub", In("v", "ids", "upd"), Attrs("dtype", f, "Tindices", wire.DTInt32)),
	), nil)
	if code := status.CodeOf(err); code != wire.InvalidArgument {
		t.Fatalf("index 3 of 3 rows: %v (code %v), want InvalidArgument", err, code)
	}
}
