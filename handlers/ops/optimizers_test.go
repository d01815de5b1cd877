package ops_test

import (
	"math"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// optimizerGraph declares resource variables (or, with ref, VariableV2s)
// named after init's keys in order, assigns them their initial values, and
// after that runs node "out", whose inputs are the variables then extra.
// Node "<name>/read" reads each variable after "out".
func optimizerGraph(ref bool, op string, vars []string, init [][]float32, shape []int64, extra []*tfpb.NodeDef, attrs map[string]*tfpb.AttrValue) []*tfpb.NodeDef {
	f := wire.DTFloat
	var nodes []*tfpb.NodeDef
	var inputs, inits []string
	for i, name := range vars {
		nodes = append(nodes, ConstF32(name+"/init_value", shape, init[i]...))
		if ref {
			nodes = append(nodes,
				NodeDef(name, "VariableV2", nil, Attrs("dtype", f, "shape", shape)),
				NodeDef(name+"/assign", "Assign", In(name, name+"/init_value"), Attrs("T", f)))
		} else {
			nodes = append(nodes,
				NodeDef(name, "VarHandleOp", nil, Attrs("dtype", f, "shape", shape)),
				NodeDef(name+"/assign", "AssignVariableOp", In(name, name+"/init_value"), Attrs("dtype", f)))
		}
		inputs = append(inputs, name)
		inits = append(inits, "^"+name+"/assign")
	}
	for _, e := range extra {
		nodes = append(nodes, e)
		inputs = append(inputs, e.Name)
	}
	nodes = append(nodes, NodeDef("out", op, append(inputs, inits...), attrs))
	for _, name := range vars {
		if ref {
			nodes = append(nodes, NodeDef(name+"/read", "Identity", In(name, "^out"), Attrs("T", f)))
		} else {
			nodes = append(nodes, NodeDef(name+"/read", "ReadVariableOp", In(name, "^out"), Attrs("dtype", f)))
		}
	}
	return nodes
}

// slotMismatch is ResourceApplyAdam on a var of shape [2] whose m slot has
// shape [3].
func slotMismatch(extra []*tfpb.NodeDef) []*tfpb.NodeDef {
	f := wire.DTFloat
	nodes := optimizerGraph(false, "ResourceApplyAdam", []string{"var", "m", "v"}, [][]float32{{1, 2}, {0}, {0}}, []int64{2}, extra, Attrs("T", f))
	for i, n := range nodes {
		if n.Name == "m/init_value" {
			nodes[i] = ConstF32("m/init_value", []int64{3}, 0)
		}
	}
	return nodes
}

func scalars(names []string, vals ...float32) []*tfpb.NodeDef {
	out := make([]*tfpb.NodeDef, len(names))
	for i, n := range names {
		out[i] = ConstF32(n, nil, vals[i])
	}
	return out
}

// Adam's first step from zero slots moves each element by lr against its
// gradient's sign: alpha = 0.1·√(1-0.999)/(1-0.9) = 0.0316228, m = 0.1·g,
// v = 0.001·g², and alpha·m/√v = 0.1·sign(g). With Nesterov, the step is
// (0.9·m + 0.1·g)/√v·alpha = 0.19·sign(g).
func TestAdamAndMomentum(t *testing.T) {
	f, i32 := wire.DTFloat, wire.DTInt32
	adamScalars := func() []*tfpb.NodeDef {
		return scalars([]string{"b1p", "b2p", "lr", "b1", "b2", "eps"}, 0.9, 0.999, 0.1, 0.9, 0.999, 1e-8)
	}
	v3 := []string{"var", "m", "v"}
	adamInit := [][]float32{{1, 2}, {0, 0}, {0, 0}}
	grad := func(shape []int64, vals ...float32) *tfpb.NodeDef { return ConstF32("grad", shape, vals...) }
	var cases []opCase
	for _, ref := range []bool{false, true} {
		prefix, dense, sparse, mom, smom := "ResourceApply", "ResourceApplyAdam", "ResourceSparseApplyAdam", "ResourceApplyMomentum", "ResourceSparseApplyMomentum"
		fetch := []string{"var/read", "m/read", "v/read"}
		if ref {
			prefix, dense, sparse, mom, smom = "Apply", "ApplyAdam", "SparseApplyAdam", "ApplyMomentum", "SparseApplyMomentum"
		}
		cases = append(cases,
			opCase{prefix + "Adam", optimizerGraph(ref, dense, v3, adamInit, []int64{2}, append(adamScalars(), grad([]int64{2}, 0.5, -1)), Attrs("T", f)),
				fetch, []wire.Tensor{F32([]int64{2}, 0.9, 2.1), F32([]int64{2}, 0.05, -0.1), F32([]int64{2}, 0.00025, 0.001)}},
			opCase{prefix + "Adam nesterov", optimizerGraph(ref, dense, v3, adamInit, []int64{2}, append(adamScalars(), grad([]int64{2}, 0.5, -1)), Attrs("T", f, "use_nesterov", true)),
				fetch[:1], []wire.Tensor{F32([]int64{2}, 0.81, 2.19)}},
			// Rows 2 and 0 move; row 1 and its slots stay.
			opCase{sparse, optimizerGraph(ref, sparse, v3, [][]float32{{1, 2, 3}, {0, 0, 0}, {0, 0, 0}}, []int64{3, 1},
				append(adamScalars(), grad([]int64{2, 1}, 0.5, -1), ConstI32("idx", []int64{2}, 2, 0)), Attrs("T", f, "Tindices", i32)),
				fetch, []wire.Tensor{F32([]int64{3, 1}, 1.1, 2, 2.9), F32([]int64{3, 1}, -0.1, 0, 0.05), F32([]int64{3, 1}, 0.001, 0, 0.00025)}},
			// accum = 0.9·0.5 + g = [1.45, 2.45]; var -= 0.1·accum.
			opCase{mom, optimizerGraph(ref, mom, []string{"var", "acc"}, [][]float32{{1, 2}, {0.5, 0.5}}, []int64{2},
				[]*tfpb.NodeDef{ConstF32("lr", nil, 0.1), grad([]int64{2}, 1, 2), ConstF32("mom", nil, 0.9)}, Attrs("T", f)),
				[]string{"var/read", "acc/read"}, []wire.Tensor{F32([]int64{2}, 0.855, 1.755), F32([]int64{2}, 1.45, 2.45)}},
			// Nesterov: var -= 0.1·g + 0.09·accum.
			opCase{mom + " nesterov", optimizerGraph(ref, mom, []string{"var", "acc"}, [][]float32{{1, 2}, {0.5, 0.5}}, []int64{2},
				[]*tfpb.NodeDef{ConstF32("lr", nil, 0.1), grad([]int64{2}, 1, 2), ConstF32("mom", nil, 0.9)}, Attrs("T", f, "use_nesterov", true)),
				[]string{"var/read"}, []wire.Tensor{F32([]int64{2}, 0.7695, 1.5795)}},
			opCase{smom, optimizerGraph(ref, smom, []string{"var", "acc"}, [][]float32{{1, 2, 3}, {0.5, 0.5, 0.5}}, []int64{3, 1},
				[]*tfpb.NodeDef{ConstF32("lr", nil, 0.1), grad([]int64{1, 1}, 1), ConstI32("idx", []int64{1}, 1), ConstF32("mom", nil, 0.9)}, Attrs("T", f, "Tindices", i32)),
				[]string{"var/read", "acc/read"}, []wire.Tensor{F32([]int64{3, 1}, 1, 1.855, 3), F32([]int64{3, 1}, 0.5, 1.45, 0.5)}},
		)
	}
	runCases(t, cases)

	// Adagrad: accum = 1 + g² = [2, 5]; var -= 0.5·g/√accum. Without
	// update_slots, accum stays 1 and var -= 0.5·g.
	for _, op := range []string{"ResourceApplyAdagrad", "ApplyAdagrad"} {
		ref := op == "ApplyAdagrad"
		adagrad := func(attrs map[string]*tfpb.AttrValue) []*tfpb.NodeDef {
			return optimizerGraph(ref, op, []string{"var", "acc"}, [][]float32{{1, 2}, {1, 1}}, []int64{2},
				[]*tfpb.NodeDef{ConstF32("lr", nil, 0.5), grad([]int64{2}, 1, 2)}, attrs)
		}
		runCases(t, []opCase{
			{op, adagrad(Attrs("T", f)), []string{"var/read", "acc/read"},
				[]wire.Tensor{F32([]int64{2}, 1-0.5/float32(math.Sqrt(2)), 2-1/float32(math.Sqrt(5))), F32([]int64{2}, 2, 5)}},
			{op + " without update_slots", adagrad(Attrs("T", f, "update_slots", false)), []string{"var/read", "acc/read"},
				[]wire.Tensor{F32([]int64{2}, 0.5, 1), F32([]int64{2}, 1, 1)}},
		})
	}

	uninit := func() []*tfpb.NodeDef {
		nodes := []*tfpb.NodeDef{
			NodeDef("var", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2})),
			NodeDef("m", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2})),
			NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2})),
		}
		nodes = append(nodes, adamScalars()...)
		return append(nodes, grad([]int64{2}, 1, 1), NodeDef("out", "ResourceApplyAdam", In("var", "m", "v", "b1p", "b2p", "lr", "b1", "b2", "eps", "grad"), Attrs("T", f)))
	}
	runErrCases(t, []errCase{
		{"Adam grad shape", optimizerGraph(false, "ResourceApplyAdam", v3, adamInit, []int64{2}, append(adamScalars(), grad([]int64{3}, 1, 1, 1)), Attrs("T", f)),
			wire.InvalidArgument, "grad has shape [3], want [2]"},
		{"Adam slot shape", slotMismatch(append(adamScalars(), grad([]int64{2}, 1, 1))), wire.InvalidArgument, "slot /m has shape [3], var /var has [2]"},
		{"Adam dtype", optimizerGraph(false, "ResourceApplyAdam", v3, adamInit, []int64{2}, append(adamScalars(), grad([]int64{2}, 1, 1)), Attrs("T", wire.DTDouble)),
			wire.InvalidArgument, "holds float, dtype is double"},
		{"Adam uninitialized", uninit(), wire.FailedPrecondition, "uninitialized"},
		{"Adam lr not scalar", optimizerGraph(false, "ResourceApplyAdam", v3, adamInit, []int64{2},
			append(scalars([]string{"b1p", "b2p"}, 0.9, 0.999), ConstF32("lr", []int64{2}, 1, 1), ConstF32("b1", nil, 0.9), ConstF32("b2", nil, 0.9), ConstF32("eps", nil, 0), grad([]int64{2}, 1, 1)), Attrs("T", f)),
			wire.InvalidArgument, "lr (input 5) must be a scalar"},
		{"sparse Adam index out of range", optimizerGraph(false, "ResourceSparseApplyAdam", v3, [][]float32{{1, 2}, {0, 0}, {0, 0}}, []int64{2, 1},
			append(adamScalars(), grad([]int64{1, 1}, 1), ConstI32("idx", []int64{1}, 2)), Attrs("T", f, "Tindices", i32)),
			wire.InvalidArgument, "not in [0, 2)"},
		{"Momentum on a handle where a ref is due", optimizerGraph(false, "ApplyMomentum", []string{"var", "acc"}, [][]float32{{1}, {1}}, []int64{1},
			[]*tfpb.NodeDef{ConstF32("lr", nil, 0.1), grad([]int64{1}, 1), ConstF32("mom", nil, 0.9)}, Attrs("T", f)),
			wire.InvalidArgument, "input 0 is not a variable ref"},
	})
}
