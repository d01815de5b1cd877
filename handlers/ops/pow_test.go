package ops_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// TestPow raises elementwise and under broadcasting, as Adam's bias
// correction beta^t does with scalars, and refuses integers and shapes
// that do not broadcast.
func TestPow(t *testing.T) {
	env := NewEnv(t)
	f := wire.DTFloat
	out, err := Run(t, env, GraphDef(
		ConstF32("x", []int64{2, 2}, 2, 3, 4, 0.5),
		ConstF32("y", []int64{2}, 2, -1),
		ConstF32("beta", nil, 0.9),
		ConstF32("t", nil, 3),
		NodeDef("p", "Pow", In("x", "y"), Attrs("T", f)),
		NodeDef("q", "Pow", In("beta", "t"), Attrs("T", f)),
	), nil, "p", "q")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Floats(&out[0]), []float32{4, 1.0 / 3, 16, 2}; !ApproxEqual(got, want) {
		t.Fatalf("Pow with broadcasting: %v, want %v", got, want)
	}
	if got := Floats(&out[1]); !ApproxEqual(got, []float32{0.729}) {
		t.Fatalf("0.9^3 = %v", got)
	}
	_, err = Run(t, env, GraphDef(
		ConstI32("a", []int64{1}, 2),
		NodeDef("p", "Pow", In("a", "a"), Attrs("T", wire.DTInt32)),
	), nil, "p")
	if status.CodeOf(err) != wire.InvalidArgument {
		t.Fatalf("Pow of int32: %v, want InvalidArgument", err)
	}
	_, err = Run(t, env, GraphDef(
		ConstF32("a", []int64{2}, 1, 2),
		ConstF32("b", []int64{3}, 1, 2, 3),
		NodeDef("p", "Pow", In("a", "b"), Attrs("T", f)),
	), nil, "p")
	if status.CodeOf(err) != wire.InvalidArgument {
		t.Fatalf("Pow of [2] and [3]: %v, want InvalidArgument", err)
	}
}
