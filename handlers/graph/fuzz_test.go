package graph_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers/graph"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// fuzzSeeds are encoded partitions as a master sends them: with function
// libraries, calls, multi-output ops and variables.
func fuzzSeeds() []*tfpb.GraphDef {
	f, i64 := wire.DTFloat, wire.DTInt64
	return []*tfpb.GraphDef{
		withLibrary(GraphDef(
			ConstF32("a", []int64{2}, 1, 2), ConstF32("b", []int64{2}, 3, 4),
			call("pc", "mul_add", In("a", "b"), []wire.DataType{f, f}, []wire.DataType{f}, Attrs("T", f)),
			NodeDef("direct", "mul_add", In("pc", "a"), Attrs("T", f)),
			ConstI64("ids", []int64{5}, 7, 3, 7, 7, 9),
			call("count", "count_ids", In("ids"), []wire.DataType{i64}, []wire.DataType{i64, wire.DTInt32}, nil),
			NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2})),
			NodeDef("init", "AssignVariableOp", In("v", "a"), Attrs("dtype", f)),
			call("bumped", "bump", In("v", "b", "^init"), []wire.DataType{wire.DTResource, f}, nil, nil),
		), mulAdd(), countIDs(), bump()),
		// Calls nested in bodies, as TensorFlow 2 writes them.
		withLibrary(GraphDef(
			ConstF32("x", []int64{2}, 1, 2),
			NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2})),
			call("top", "outer", In("x", "v"), []wire.DataType{f, wire.DTResource}, []wire.DataType{f}, nil),
		), nestedLibrary()...),
		withLibrary(GraphDef(ConstF32("x", nil, 1), call("c", "f0", In("x"), []wire.DataType{f}, []wire.DataType{f}, nil)), chain(3)...),
		GraphDef(ConstF32("x", []int64{3}, 1, 2, 3), ConstI32("p", []int64{3}, 0, 1, 0),
			NodeDef("dp", "DynamicPartition", In("x", "p"), Attrs("T", f, "num_partitions", 2)),
			ConstI32("i0", []int64{2}, 0, 2), ConstI32("i1", []int64{1}, 1),
			NodeDef("st", "DynamicStitch", In("i0", "i1", "dp:0", "dp:1"), Attrs("T", f, "N", 2))),
	}
}

// FuzzBuild builds whatever a RegisterGraph request's graph decodes to:
// Build, which inlines the library's functions, must refuse what it cannot
// run with an error, never panic or hang. (Accepted graphs are not run: a
// fuzzed _Recv would wait forever, a fuzzed Fill allocate gigabytes.)
func FuzzBuild(f *testing.F) {
	for _, g := range fuzzSeeds() {
		b, err := proto.Marshal(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var def tfpb.GraphDef
		if proto.Unmarshal(b, &def) != nil {
			return
		}
		graph.Build(&def, NewEnv(t))
	})
}
