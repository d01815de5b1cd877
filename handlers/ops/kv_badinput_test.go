package ops_test

import (
	"strings"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestKvBadInput checks the refusals of calls that do not fit an
// embedding variable, each naming it and what did not match: a key dtype
// it does not take, values of another shape, and the ps serving on after.
func TestKvBadInput(t *testing.T) {
	env := NewEnv(t)
	if _, err := Run(t, env, kvInitGraph(0), nil); err != nil {
		t.Fatal(err)
	}
	kvStep(t, env, []int64{1, 2}, []float32{1, 1, 1, 1})
	i32 := func(kv ...any) map[string]*tfpb.AttrValue { return Attrs(append(kv, "Tkeys", wire.DTInt32)...) }
	handle32 := NodeDef("emb", "KvVarHandleOp", nil, i32("dtype", wire.DTFloat, "shape", []int64{kvDim}, "shared_name", "emb"))
	cases := []struct {
		name  string
		nodes []*tfpb.NodeDef
		code  wire.Code
		msg   string
	}{
		{"int32 keys for int64 ones", []*tfpb.NodeDef{kvHandle("emb"), ConstI32("ids", []int64{1}, 1), ConstF32("dv", []int64{kvDim}),
			NodeDef("out", "KvResourceGather", In("emb", "ids", "dv"), i32("dtype", wire.DTFloat))},
			wire.InvalidArgument, "embedding variable /emb takes int64 keys, the node gives int32"},
		{"a handle of int32 keys to an int64 variable", []*tfpb.NodeDef{handle32, ConstI32("ids", []int64{1}, 1), ConstF32("dv", []int64{kvDim}),
			NodeDef("out", "KvResourceGather", In("emb", "ids", "dv"), i32("dtype", wire.DTFloat))},
			wire.InvalidArgument, "embedding variable /emb has int64 keys and rows of 2, the node asks for int32 and 2"},
		{"a handle of rows of 3", []*tfpb.NodeDef{NodeDef("out", "KvVarHandleOp", nil, Attrs("dtype", wire.DTFloat, "shape", []int64{3}, "Tkeys", wire.DTInt64, "shared_name", "emb"))},
			wire.InvalidArgument, "embedding variable /emb has int64 keys and rows of 2, the node asks for int64 and 3"},
		{"string keys", []*tfpb.NodeDef{NodeDef("out", "KvVarHandleOp", nil, Attrs("dtype", wire.DTFloat, "shape", []int64{kvDim}, "Tkeys", wire.DTString, "shared_name", "s"))},
			wire.InvalidArgument, "Tkeys"},
		{"gradients of rows of 3", []*tfpb.NodeDef{kvHandle("emb"), kvHandle("emb/Adagrad"), ConstF32("lr", nil, 0.5), ConstF32("grad", []int64{1, 3}, 1, 1, 1),
			ConstI64("ids", []int64{1}, 1), ConstI64("step", nil, 1),
			NodeDef("out", "KvResourceSparseApplyAdagrad", In("emb", "emb/Adagrad", "lr", "grad", "ids", "step"), Attrs("T", wire.DTFloat, "Tindices", wire.DTInt64, "Tstep", wire.DTInt64))},
			wire.InvalidArgument, "embedding variable /emb: grad [1,3] for indices [1], want [1,2]"},
		{"Adagrad with int32 indices", []*tfpb.NodeDef{kvHandle("emb"), kvHandle("emb/Adagrad"), ConstF32("lr", nil, 0.5), ConstF32("grad", []int64{1, 2}, 1, 1),
			ConstI32("ids", []int64{1}, 1), ConstI64("step", nil, 1),
			NodeDef("out", "KvResourceSparseApplyAdagrad", In("emb", "emb/Adagrad", "lr", "grad", "ids", "step"), Attrs("T", wire.DTFloat, "Tindices", wire.DTInt32, "Tstep", wire.DTInt64))},
			wire.InvalidArgument, "embedding variable /emb takes int64 keys, the node gives int32"},
	}
	for _, tc := range cases {
		_, err := Run(t, env, GraphDef(tc.nodes...), nil)
		if status.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), `node "`) {
			t.Fatalf("%s: %v (code %v), want %v containing %q from a node", tc.name, err, status.CodeOf(err), tc.code, tc.msg)
		}
	}
	// The variable serves on, as it was.
	before, _ := kvStep(t, env, []int64{1}, []float32{0, 0})
	if before[0] == 1 || before[0] != before[1] {
		t.Fatalf("row 1 after refused calls: %v, want its trained value", before)
	}
}
