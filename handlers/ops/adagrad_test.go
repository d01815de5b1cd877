package ops_test

import (
	"math"
	"slices"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
)

// TestSparseAdagradRowsInOrder: rows that share a lock stripe, a duplicate
// index among them, are updated as one pass over the indices in their
// order would update them, to the bit.
func TestSparseAdagradRowsInOrder(t *testing.T) {
	const rows, width = 200, 2
	ids := []int64{5, 69, 5, 133, 1, 69} // 5, 69 and 133 share stripe 5 of 64
	grads := []float32{0.5, -1, 0.25, 2, -0.75, 1.5, 0.125, -0.5, 1, 1, -2, 0.25}
	const lr, acc0 = float32(0.2), float32(0.1)
	env := NewEnv(t)
	f, i64 := wire.DTFloat, wire.DTInt64
	shape := []int64{rows, width}
	vars := GraphDef(
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", shape)),
		NodeDef("acc", "VarHandleOp", nil, Attrs("dtype", f, "shape", shape)),
	)
	init := vars
	init.Node = append(slices.Clone(vars.Node),
		ConstF32("zeros", shape),
		ConstF32("acc0", shape, acc0),
		NodeDef("init_v", "AssignVariableOp", In("v", "zeros"), Attrs("dtype", f)),
		NodeDef("init_acc", "AssignVariableOp", In("acc", "acc0"), Attrs("dtype", f)))
	if _, err := Run(t, env, init, nil); err != nil {
		t.Fatal(err)
	}
	apply := GraphDef(append(slices.Clone(vars.Node),
		ConstF32("lr", nil, lr),
		ConstF32("grad", []int64{int64(len(ids)), width}, grads...),
		ConstI64("ids", []int64{int64(len(ids))}, ids...),
		NodeDef("apply", "ResourceSparseApplyAdagrad", In("v", "acc", "lr", "grad", "ids"), Attrs("T", f, "Tindices", i64)),
		NodeDef("read_v", "ReadVariableOp", In("v"), Attrs("dtype", f)),
		NodeDef("read_acc", "ReadVariableOp", In("acc"), Attrs("dtype", f)),
	)...)
	apply.Node[len(apply.Node)-2].Input = append(apply.Node[len(apply.Node)-2].Input, "^apply")
	apply.Node[len(apply.Node)-1].Input = append(apply.Node[len(apply.Node)-1].Input, "^apply")
	out, err := Run(t, env, apply, nil, "read_v", "read_acc")
	if err != nil {
		t.Fatal(err)
	}
	wantV, wantAcc := make([]float32, rows*width), make([]float32, rows*width)
	for i := range wantAcc {
		wantAcc[i] = acc0
	}
	for i, x := range ids {
		for j := range width {
			e, g := int(x)*width+j, grads[i*width+j]
			wantAcc[e] += g * g
			wantV[e] -= lr * g / float32(math.Sqrt(float64(wantAcc[e])))
		}
	}
	for k, want := range [][]float32{wantV, wantAcc} {
		got := Floats(&out[k])
		for e := range want {
			if math.Float32bits(got[e]) != math.Float32bits(want[e]) {
				t.Fatalf("%s[%d] = %v, want %v", []string{"var", "accum"}[k], e, got[e], want[e])
			}
		}
	}
}
