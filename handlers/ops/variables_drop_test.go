package ops_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
)

// TestDropVariable drops one variable and leaves its container's others.
func TestDropVariable(t *testing.T) {
	env := NewEnv(t)
	f := wire.DTFloat
	for _, name := range []string{"a", "b"} {
		if _, err := Run(t, env, GraphDef(
			NodeDef("h", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{1}, "container", "c", "shared_name", name)),
			ConstF32("one", []int64{1}, 1),
			NodeDef("init", "AssignVariableOp", In("h", "one"), Attrs("dtype", f)),
		), nil); err != nil {
			t.Fatal(err)
		}
	}
	env.Vars.Drop("c", "a")
	env.Vars.Drop("c", "unknown")
	if n := env.Vars.Len(); n != 1 {
		t.Fatalf("%d variables after dropping one of two", n)
	}
	read := func(name string) error {
		_, err := Run(t, env, GraphDef(
			NodeDef("h", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{1}, "container", "c", "shared_name", name)),
			NodeDef("read", "ReadVariableOp", In("h"), Attrs("dtype", f)),
		), nil, "read")
		return err
	}
	if err := read("a"); err == nil {
		t.Fatal("the dropped variable reads")
	}
	if err := read("b"); err != nil {
		t.Fatalf("the other variable: %v", err)
	}
}
