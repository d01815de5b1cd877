package ops_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/starwire/starwire/handlers/graph"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// hashTableNode is a MutableHashTableOfTensorsV2 of int64 keys to float
// vectors of width, with extra attributes.
func hashTableNode(name string, width int64, kv ...any) *tfpb.NodeDef {
	attrs := Attrs(append([]any{"key_dtype", wire.DTInt64, "value_dtype", wire.DTFloat, "value_shape", []int64{width}}, kv...)...)
	return NodeDef(name, "MutableHashTableOfTensorsV2", nil, attrs)
}

// tableOps are the nodes using table: insert of keys ins with rows of
// vals, find of keys find with default zeros, size.
func tableOps(table string, width int, ins []int64, vals []float32, find []int64) []*tfpb.NodeDef {
	p := table + "_"
	return []*tfpb.NodeDef{
		ConstI64(p+"ik", []int64{int64(len(ins))}, ins...),
		ConstF32(p+"iv", []int64{int64(len(ins)), int64(width)}, vals...),
		NodeDef(p+"insert", "LookupTableInsertV2", In(table, p+"ik", p+"iv"), Attrs("Tin", wire.DTInt64, "Tout", wire.DTFloat)),
		ConstI64(p+"fk", []int64{int64(len(find))}, find...),
		ConstF32(p+"def", []int64{int64(width)}),
		NodeDef(p+"find", "LookupTableFindV2", In(table, p+"fk", p+"def", "^"+p+"insert"), Attrs("Tin", wire.DTInt64, "Tout", wire.DTFloat)),
		NodeDef(p+"size", "LookupTableSizeV2", In(table, "^"+p+"insert"), nil),
	}
}

// findOnly is a graph that looks keys up in table without writing.
func findOnly(table *tfpb.NodeDef, width int, keys ...int64) *tfpb.GraphDef {
	return GraphDef(table,
		ConstI64("fk", []int64{int64(len(keys))}, keys...),
		ConstF32("def", []int64{int64(width)}),
		NodeDef("find", "LookupTableFindV2", In(table.Name, "fk", "def"), Attrs("Tin", wire.DTInt64, "Tout", wire.DTFloat)),
		NodeDef("size", "LookupTableSizeV2", In(table.Name), nil))
}

// sizeOf runs a graph holding table and returns its size.
func sizeOf(t *testing.T, env *ops.Env, table *tfpb.NodeDef) int64 {
	t.Helper()
	out, err := Run(t, env, GraphDef(table, NodeDef("size", "LookupTableSizeV2", In(table.Name), nil)), nil, "size")
	if err != nil {
		t.Fatal(err)
	}
	return tensor.View[int64](out[0].Data)[0]
}

// TestTableSharing checks TensorFlow's sharing rules: a table named by
// its node (use_node_name_sharing) or by shared_name is one table for
// every graph naming it, containers keep tables of one name apart,
// Cleanup of a container empties its tables alone, and a table with
// neither is its kernel's own.
func TestTableSharing(t *testing.T) {
	env := NewEnv(t)
	byNode := hashTableNode("emb", 2, "use_node_name_sharing", true)
	g := GraphDef(append([]*tfpb.NodeDef{byNode}, tableOps("emb", 2, []int64{7}, []float32{1, 2}, nil)...)...)
	if _, err := Run(t, env, g, nil); err != nil {
		t.Fatal(err)
	}
	out, err := Run(t, env, findOnly(byNode, 2, 7), nil, "find")
	if err != nil {
		t.Fatal(err)
	}
	if got := Floats(&out[0]); !ApproxEqual(got, []float32{1, 2}) {
		t.Fatalf("another graph finds %v in the table by node name, want [1 2]", got)
	}

	// One shared_name in two containers: two tables.
	inA := hashTableNode("a", 1, "shared_name", "s", "container", "A")
	inB := hashTableNode("b", 1, "shared_name", "s", "container", "B")
	g = GraphDef(append(append([]*tfpb.NodeDef{inA, inB}, tableOps("a", 1, []int64{1, 2}, []float32{1, 2}, nil)...),
		tableOps("b", 1, []int64{3}, []float32{3}, nil)...)...)
	if _, err := Run(t, env, g, nil); err != nil {
		t.Fatal(err)
	}
	alsoA := hashTableNode("other_name", 1, "shared_name", "s", "container", "A")
	if a, b := sizeOf(t, env, alsoA), sizeOf(t, env, inB); a != 2 || b != 1 {
		t.Fatalf("sizes of s in A and B: %d and %d, want 2 and 1", a, b)
	}
	env.Vars.Cleanup([]string{"A"})
	if a, b, n := sizeOf(t, env, alsoA), sizeOf(t, env, inB), sizeOf(t, env, byNode); a != 0 || b != 1 || n != 1 {
		t.Fatalf("after Cleanup(A): sizes %d, %d, %d, want 0, 1, 1", a, b, n)
	}
	env.Vars.Cleanup(nil)
	if n := sizeOf(t, env, byNode); n != 0 {
		t.Fatalf("after Cleanup(): size %d, want 0", n)
	}
}

// TestPrivateTable checks that a table neither shared by name nor by
// node is its kernel's: it keeps its keys across the steps of its graph,
// and another graph of the same node has a table of its own.
func TestPrivateTable(t *testing.T) {
	env := NewEnv(t)
	private := hashTableNode("p", 1)
	g := GraphDef(append([]*tfpb.NodeDef{private}, tableOps("p", 1, []int64{4}, []float32{4}, []int64{4})...)...)
	built, err := graph.Build(g, env)
	if err != nil {
		t.Fatal(err)
	}
	for step := int64(1); step <= 2; step++ {
		out, _, err := built.Run(context.Background(), &tfpb.RunGraphRequest{StepId: step, RecvKey: []string{"p_size"}}, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if n := tensor.View[int64](out[0].Data)[0]; n != 1 {
			t.Fatalf("step %d: size %d, want 1", step, n)
		}
		tensor.ReleaseAll(out)
	}
	out, err := Run(t, env, findOnly(private, 1, 4), nil, "find", "size")
	if err != nil {
		t.Fatal(err)
	}
	if got, n := Floats(&out[0]), tensor.View[int64](out[1].Data)[0]; got[0] != 0 || n != 0 {
		t.Fatalf("another graph's private table holds %d keys and finds %v, want none", n, got)
	}
}

// TestTableErrors checks the errors of tables and their ops: the code
// TensorFlow answers, and a message naming the table (or the node, for
// a refused node) and what did not match.
func TestTableErrors(t *testing.T) {
	emb := hashTableNode("emb", 4, "use_node_name_sharing", true)
	dense := NodeDef("dense", "MutableDenseHashTableV2", In("ek", "dk"), Attrs("key_dtype", wire.DTInt64, "value_dtype", wire.DTFloat,
		"use_node_name_sharing", true, "initial_num_buckets", 8))
	denseKeys := []*tfpb.NodeDef{ConstI64("ek", nil, -1), ConstI64("dk", nil, -2)}
	find := func(keys *tfpb.NodeDef, def *tfpb.NodeDef, tin wire.DataType) []*tfpb.NodeDef {
		return []*tfpb.NodeDef{keys, def, NodeDef("out", "LookupTableFindV2", In("emb", keys.Name, def.Name), Attrs("Tin", tin, "Tout", wire.DTFloat))}
	}
	cases := []errCase{
		{"keys of another dtype", append([]*tfpb.NodeDef{emb}, find(ConstI32("k", []int64{1}, 1), ConstF32("d", []int64{4}), wire.DTInt32)...),
			wire.InvalidArgument, "table /emb holds int64 keys"},
		{"default of another shape", append([]*tfpb.NodeDef{emb}, find(ConstI64("k", []int64{2}, 1, 2), ConstF32("d", []int64{3}), wire.DTInt64)...),
			wire.InvalidArgument, "table /emb: expected shape [4] or [2,4] for default value, got [3]"},
		{"values of another shape", []*tfpb.NodeDef{emb, ConstI64("k", []int64{3}, 1, 2, 3), ConstF32("v", []int64{3, 2}),
			NodeDef("out", "LookupTableInsertV2", In("emb", "k", "v"), Attrs("Tin", wire.DTInt64, "Tout", wire.DTFloat))},
			wire.InvalidArgument, "table /emb: expected shape [3,4] for value, got [3,2]"},
		{"import of mismatched keys and values", []*tfpb.NodeDef{emb, ConstI64("k", []int64{3}, 1, 2, 3), ConstF32("v", []int64{2, 4}),
			NodeDef("out", "LookupTableImportV2", In("emb", "k", "v"), Attrs("Tin", wire.DTInt64, "Tout", wire.DTFloat))},
			wire.InvalidArgument, "table /emb: expected shape [3,4] for value, got [2,4]"},
		{"export of other dtypes", []*tfpb.NodeDef{emb, NodeDef("out", "LookupTableExportV2", In("emb"), Attrs("Tkeys", wire.DTString, "Tvalues", wire.DTFloat))},
			wire.InvalidArgument, "table /emb holds int64 keys and float values, the node names string and float"},
		{"a table of another kind under the name", []*tfpb.NodeDef{emb, NodeDef("size", "LookupTableSizeV2", In("emb"), nil),
			NodeDef("out", "MutableHashTableV2", In("^size"), Attrs("key_dtype", wire.DTInt64, "value_dtype", wire.DTFloat, "shared_name", "emb"))},
			wire.InvalidArgument, "table /emb is MutableHashTableOfTensorsV2 int64[] -> float[4], the node asks for MutableHashTableV2 int64[] -> float[]"},
		{"dense import of a bucket count not a power of two", append(append([]*tfpb.NodeDef{dense}, denseKeys...),
			ConstI64("k", []int64{6, 1}, -1, -1, -1, -1, -1, -1), ConstF32("v", []int64{6, 1}),
			NodeDef("out", "LookupTableImportV2", In("dense", "k", "v"), Attrs("Tin", wire.DTInt64, "Tout", wire.DTFloat))),
			wire.InvalidArgument, "table /dense: import: number of buckets must be at least 4 and a power of 2, got: 6"},
		{"dense keys of another shape", append(append([]*tfpb.NodeDef{dense}, denseKeys...),
			ConstI64("k", []int64{2, 2}, 1, 2, 3, 4), ConstF32("d", nil),
			NodeDef("out", "LookupTableFindV2", In("dense", "k", "d"), Attrs("Tin", wire.DTInt64, "Tout", wire.DTFloat))),
			wire.InvalidArgument, "table /dense: expected key shape [2] got [2,2]"},
		{"dense table with equal empty and deleted keys", []*tfpb.NodeDef{ConstI64("ek", nil, -1), ConstI64("dk", nil, -1),
			NodeDef("out", "MutableDenseHashTableV2", In("ek", "dk"), Attrs("key_dtype", wire.DTInt64, "value_dtype", wire.DTFloat))},
			wire.InvalidArgument, "empty and deleted keys cannot be equal"},
		{"a handle fed to an op taking tensors", []*tfpb.NodeDef{emb, NodeDef("out", "Identity", In("emb"), Attrs("T", wire.DTResource))},
			wire.InvalidArgument, "input 0 is a resource handle"},
	}
	runErrCases(t, cases)

	// Refused when the graph is registered.
	builds := []struct {
		name string
		node *tfpb.NodeDef
		msg  string
	}{
		{"unregistered dtypes", NodeDef("out", "MutableHashTableV2", nil, Attrs("key_dtype", wire.DTString, "value_dtype", wire.DTString)),
			"no MutableHashTableV2 kernel for key_dtype string and value_dtype string"},
		{"scalar values of a table of tensors", NodeDef("out", "MutableHashTableOfTensorsV2", nil, Attrs("key_dtype", wire.DTInt64, "value_dtype", wire.DTFloat, "value_shape", []int64{})),
			"default value must be a vector, got shape []"},
		{"bucket count", NodeDef("out", "MutableDenseHashTableV2", In("ek", "dk"), Attrs("key_dtype", wire.DTInt64, "value_dtype", wire.DTFloat, "initial_num_buckets", 6)),
			"number of buckets must be at least 4 and a power of 2, got: 6"},
	}
	for _, tc := range builds {
		t.Run(tc.name, func(t *testing.T) {
			_, err := graph.Build(GraphDef(append(denseKeys, tc.node)...), NewEnv(t))
			if status.CodeOf(err) != wire.InvalidArgument || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), `node "out"`) {
				t.Fatalf("err = %v, want InvalidArgument naming node out and saying %q", err, tc.msg)
			}
		})
	}
}

// TestRefusedImportLeavesTable checks that an import refused for its
// shapes leaves the table as it was.
func TestRefusedImportLeavesTable(t *testing.T) {
	env := NewEnv(t)
	emb := hashTableNode("emb", 2, "use_node_name_sharing", true)
	g := GraphDef(append([]*tfpb.NodeDef{emb}, tableOps("emb", 2, []int64{1, 2}, []float32{1, 1, 2, 2}, nil)...)...)
	if _, err := Run(t, env, g, nil); err != nil {
		t.Fatal(err)
	}
	bad := GraphDef(emb, ConstI64("k", []int64{1}, 9), ConstF32("v", []int64{2, 2}),
		NodeDef("imp", "LookupTableImportV2", In("emb", "k", "v"), Attrs("Tin", wire.DTInt64, "Tout", wire.DTFloat)))
	if _, err := Run(t, env, bad, nil); status.CodeOf(err) != wire.InvalidArgument {
		t.Fatalf("import of 1 key and 2 values: %v, want InvalidArgument", err)
	}
	out, err := Run(t, env, findOnly(emb, 2, 2, 9), nil, "find", "size")
	if err != nil {
		t.Fatal(err)
	}
	if got, n := Floats(&out[0]), tensor.View[int64](out[1].Data)[0]; n != 2 || !ApproxEqual(got, []float32{2, 2, 0, 0}) {
		t.Fatalf("after a refused import: %d keys, find [2 9] = %v; want 2 keys, [2 2 0 0]", n, got)
	}
}

// TestTableInt32AndScalars runs a MutableHashTableV2 of int32 keys to
// int32 values: its keys keep their dtype through export.
func TestTableInt32AndScalars(t *testing.T) {
	table := NodeDef("t", "MutableHashTableV2", nil, Attrs("key_dtype", wire.DTInt32, "value_dtype", wire.DTInt32))
	g := GraphDef(table,
		ConstI32("k", []int64{3}, -5, 1<<30, 7), ConstI32("v", []int64{3}, 50, 60, 70),
		NodeDef("ins", "LookupTableInsertV2", In("t", "k", "v"), Attrs("Tin", wire.DTInt32, "Tout", wire.DTInt32)),
		ConstI32("rk", []int64{1}, 7),
		NodeDef("rm", "LookupTableRemoveV2", In("t", "rk", "^ins"), Attrs("Tin", wire.DTInt32)),
		ConstI32("fk", []int64{2, 2}, 1<<30, 7, -5, 0), ConstI32("d", nil, -1),
		NodeDef("find", "LookupTableFindV2", In("t", "fk", "d", "^rm"), Attrs("Tin", wire.DTInt32, "Tout", wire.DTInt32)),
		NodeDef("exp", "LookupTableExportV2", In("t", "^rm"), Attrs("Tkeys", wire.DTInt32, "Tvalues", wire.DTInt32)))
	runCases(t, []opCase{{name: "int32", nodes: g.Node, fetches: []string{"find"},
		want: []wire.Tensor{I32([]int64{2, 2}, 60, -1, 50, -1)}}})
	out, err := Run(t, NewEnv(t), g, nil, "exp:0", "exp:1")
	if err != nil {
		t.Fatal(err)
	}
	kv := sortedRows(t, out)
	wantTs := []wire.Tensor{I32([]int64{2}, -5, 1<<30), I32([]int64{2}, 50, 60)}
	defer tensor.ReleaseAll(wantTs)
	want := sortedRows(t, wantTs)
	for i := range want {
		checkTensor(t, fmt.Sprintf("exp:%d", i), &kv[i], &want[i])
	}
}

// TestTableConcurrentSteps runs steps inserting, finding and removing
// keys of one table at once: every lookup sees a key's whole value or
// the default, never part of one, and the table ends with the keys no
// step removed. Run it with -race.
func TestTableConcurrentSteps(t *testing.T) {
	env := NewEnv(t)
	const width, steps, keysPerStep = 8, 8, 256
	emb := hashTableNode("emb", width, "use_node_name_sharing", true)
	var wg sync.WaitGroup
	errs := make(chan error, steps)
	for s := range steps {
		keys := make([]int64, keysPerStep)
		vals := make([]float32, 0, keysPerStep*width)
		for i := range keys {
			keys[i] = int64(i*steps + s) // disjoint across steps
			for range width {
				vals = append(vals, float32(keys[i]))
			}
		}
		// Each step inserts its keys, looks up every step's, and removes
		// its odd keys.
		all := make([]int64, steps*keysPerStep)
		for i := range all {
			all[i] = int64(i)
		}
		nodes := append([]*tfpb.NodeDef{emb}, tableOps("emb", width, keys, vals, all)...)
		var odd []int64
		for _, k := range keys {
			if k%2 == 1 {
				odd = append(odd, k)
			}
		}
		nodes = append(nodes, ConstI64("rk", []int64{int64(len(odd))}, odd...),
			NodeDef("rm", "LookupTableRemoveV2", In("emb", "rk", "^emb_find"), Attrs("Tin", wire.DTInt64)))
		g, err := graph.Build(GraphDef(nodes...), env)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for round := range 4 {
				out, _, err := g.Run(context.Background(), &tfpb.RunGraphRequest{StepId: int64(100*s + round), RecvKey: []string{"emb_find"}}, nil, false)
				if err != nil {
					errs <- err
					return
				}
				rows := tensor.View[float32](out[0].Data)
				for i := range all {
					row := rows[i*width : (i+1)*width]
					for _, v := range row {
						if v != row[0] || (v != 0 && v != float32(i)) {
							errs <- fmt.Errorf("key %d: row %v, want all %d or all 0", i, row, i)
							break
						}
					}
				}
				tensor.ReleaseAll(out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := sizeOf(t, env, emb); n != steps*keysPerStep/2 {
		t.Fatalf("size %d, want the %d even keys", n, steps*keysPerStep/2)
	}
}
