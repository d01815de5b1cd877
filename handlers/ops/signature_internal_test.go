package ops

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestSpecKernelChecks runs Spec.Kernel's declared checks on a spec of
// every kind of declaration: N pairs of inputs and one more, a type list
// counting the outputs, a type attribute with a type set and a fixed-size
// one. Build must run only when they all pass, and see NumOutputs set.
func TestSpecKernelChecks(t *testing.T) {
	errBuild := errors.New("built")
	var built *Node
	spec := &Spec{
		Inputs:     byInt("N", 1).times(2).plus(1),
		Types:      []TypeAttr{typeIn("T", floatTypes...), fixedSize("Tdata"), anyType("Tany")},
		NumOutputs: byList("dtypes").plus(1),
		Build: func(_ *Env, n *Node) (Kernel, error) {
			built = n
			return nil, errBuild
		},
	}
	good := func() map[string]*tfpb.AttrValue {
		return map[string]*tfpb.AttrValue{
			"N": intAttr(2), "T": typeAttr(wire.DTDouble), "Tdata": typeAttr(wire.DTInt32), "Tany": typeAttr(wire.DTString),
			"dtypes": {Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{Type: []tfpb.DataType{tfpb.DataType(wire.DTFloat), tfpb.DataType(wire.DTInt64)}}}},
		}
	}
	for _, tc := range []struct {
		name   string
		inputs int
		edit   func(map[string]*tfpb.AttrValue)
		want   string // "" when Build runs
	}{
		{"good", 5, func(map[string]*tfpb.AttrValue) {}, ""},
		{"inputs", 4, func(map[string]*tfpb.AttrValue) {}, "has 4 data inputs, want 5"},
		{"N missing", 5, func(a map[string]*tfpb.AttrValue) { delete(a, "N") }, `missing attr "N"`},
		{"N too small", 1, func(a map[string]*tfpb.AttrValue) { a["N"] = intAttr(0) }, "N is 0, want at least 1"},
		{"N too large", 5, func(a map[string]*tfpb.AttrValue) { a["N"] = intAttr(1 << 40) }, "N is 1099511627776, want at most 65536"},
		{"N a bool", 5, func(a map[string]*tfpb.AttrValue) { a["N"] = boolAttr(true) }, `attr "N" is not an int`},
		{"T outside its set", 5, func(a map[string]*tfpb.AttrValue) { a["T"] = typeAttr(wire.DTInt32) }, `attr "T" is int32, want one of [float double]`},
		{"Tdata a string", 5, func(a map[string]*tfpb.AttrValue) { a["Tdata"] = typeAttr(wire.DTString) }, `attr "Tdata" is string: only fixed-size types are supported`},
		{"Tany missing", 5, func(a map[string]*tfpb.AttrValue) { delete(a, "Tany") }, `missing attr "Tany"`},
		{"dtypes not a list", 5, func(a map[string]*tfpb.AttrValue) { a["dtypes"] = intAttr(1) }, `attr "dtypes" is not a list`},
		// The inputs are checked before the types, as the builders did.
		{"inputs before types", 3, func(a map[string]*tfpb.AttrValue) { delete(a, "T") }, "has 3 data inputs, want 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			built = nil
			attrs := good()
			tc.edit(attrs)
			n := &Node{Name: "n", Op: "Test", Attrs: attrs, NumInputs: tc.inputs}
			_, err := spec.Kernel(&Env{}, n)
			if tc.want == "" {
				if !errors.Is(err, errBuild) || built != n {
					t.Fatalf("Kernel = %v, Build ran on %v; want Build's error from n", err, built)
				}
				if n.NumOutputs != 3 {
					t.Errorf("NumOutputs = %d, want 3", n.NumOutputs)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || built != nil {
				t.Fatalf("Kernel = %v (Build ran: %t), want %q before Build", err, built != nil, tc.want)
			}
		})
	}
}

// TestSpecKernelNamedOutputs checks that a spec naming its outputs and
// declaring no count makes one output a name.
func TestSpecKernelNamedOutputs(t *testing.T) {
	spec := &Spec{Outputs: []string{"y", "idx"}, Build: func(*Env, *Node) (Kernel, error) { return nil, nil }}
	n := &Node{Name: "n", Op: "Test"}
	if _, err := spec.Kernel(&Env{}, n); err != nil || n.NumOutputs != 2 {
		t.Fatalf("Kernel = %v, NumOutputs %d; want nil, 2", err, n.NumOutputs)
	}
}

// TestTableAttrMatchesOf checks that a type a table declares is one its
// of finds code for, for the tables the arithmetic specs declare.
func TestTableAttrMatchesOf(t *testing.T) {
	for op := range floorModOp + 1 {
		table := binaryTable(op)
		for _, dt := range table.attr("T").allowed {
			n := &Node{Op: "Test", Attrs: map[string]*tfpb.AttrValue{"T": typeAttr(dt)}}
			if got, f := table.of(n, "T"); got != dt || f == nil {
				t.Errorf("binary %d: of(%v) = %v, %v", op, dt, got, f != nil)
			}
		}
	}
	if got := binaryTable(divOp).attr("T").allowed; len(got) != 2 {
		t.Errorf("RealDiv declares %v, want the float types", got)
	}
	if got := unaryTable(sigmoidOp).attr("T").allowed; len(got) != 2 {
		t.Errorf("Sigmoid declares %v, want the float types", got)
	}
	if got := unaryTable(negOp).attr("T").allowed; len(got) != 4 {
		t.Errorf("Neg declares %v, want the numeric types", got)
	}
}

// TestSpecKernelListsAndOptional runs the declarations of type lists,
// storable types and optional trailing inputs: a list must have its least
// length and each of its types as its element allows, and a node may have
// the optional inputs or not, but no more.
func TestSpecKernelListsAndOptional(t *testing.T) {
	errBuild := errors.New("built")
	var got []wire.DataType
	spec := &Spec{
		Inputs:     exactly(2).orUpTo(1),
		Types:      []TypeAttr{listOf(storable("Tc"), 1), listOf(typeIn("Tk", indexTypes...), 0), storable("T")},
		NumOutputs: byList("Tc"),
		Build: func(_ *Env, n *Node) (Kernel, error) {
			got = n.typesOf("Tc")
			return nil, errBuild
		},
	}
	list := func(dts ...wire.DataType) *tfpb.AttrValue {
		l := &tfpb.AttrValue_ListValue{}
		for _, dt := range dts {
			l.Type = append(l.Type, tfpb.DataType(dt))
		}
		return &tfpb.AttrValue{Value: &tfpb.AttrValue_List{List: l}}
	}
	for _, tc := range []struct {
		name   string
		inputs int
		edit   func(map[string]*tfpb.AttrValue)
		want   string // "" when Build runs
	}{
		{"good", 2, func(map[string]*tfpb.AttrValue) {}, ""},
		{"with the optional input", 3, func(map[string]*tfpb.AttrValue) {}, ""},
		{"too few inputs", 1, func(map[string]*tfpb.AttrValue) {}, "has 1 data inputs, want 2 or 3"},
		{"too many inputs", 4, func(map[string]*tfpb.AttrValue) {}, "has 4 data inputs, want 2 or 3"},
		{"Tc empty", 2, func(a map[string]*tfpb.AttrValue) { a["Tc"] = list() }, `attr "Tc" has 0 types, want at least 1`},
		{"Tc holds a resource", 2, func(a map[string]*tfpb.AttrValue) { a["Tc"] = list(wire.DTFloat, wire.DTResource) },
			`attr "Tc"[1] is resource: only fixed-size types and strings are supported`},
		{"Tc a type", 2, func(a map[string]*tfpb.AttrValue) { a["Tc"] = typeAttr(wire.DTFloat) }, `attr "Tc" is not a list`},
		{"Tk empty", 2, func(a map[string]*tfpb.AttrValue) { a["Tk"] = list() }, ""},
		{"Tk outside its set", 2, func(a map[string]*tfpb.AttrValue) { a["Tk"] = list(wire.DTInt64, wire.DTFloat) },
			`attr "Tk"[1] is float, want one of [int32 int64]`},
		{"T a variant", 2, func(a map[string]*tfpb.AttrValue) { a["T"] = typeAttr(wire.DTVariant) },
			`attr "T" is variant: only fixed-size types and strings are supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			attrs := map[string]*tfpb.AttrValue{"Tc": list(wire.DTString, wire.DTInt64), "Tk": list(wire.DTInt32), "T": typeAttr(wire.DTString)}
			tc.edit(attrs)
			n := &Node{Name: "n", Op: "Test", Attrs: attrs, NumInputs: tc.inputs}
			_, err := spec.Kernel(&Env{}, n)
			if tc.want == "" {
				if !errors.Is(err, errBuild) {
					t.Fatalf("Kernel = %v, want Build's error", err)
				}
				if want := n.typesOf("Tc"); len(got) != 2 || got[0] != want[0] || got[1] != want[1] || n.NumOutputs != 2 {
					t.Errorf("Build saw Tc %v, NumOutputs %d; want %v, 2", got, n.NumOutputs, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || got != nil {
				t.Fatalf("Kernel = %v (Build ran: %t), want %q before Build", err, got != nil, tc.want)
			}
		})
	}
}

// TestRegisterRefusesOptionalOutputs checks that an output count cannot
// be optional: a kernel makes the outputs it declares.
func TestRegisterRefusesOptionalOutputs(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("registerOp accepted optional outputs")
		}
		delete(specs, "TestOptionalOutputs")
	}()
	registerOp("TestOptionalOutputs", &Spec{Inputs: exactly(0), NumOutputs: exactly(1).orUpTo(1)})
}

// undeclared are the ops whose builders count their own inputs or
// outputs, each with why no Count can say it. None is, today: a new op
// declares its signature, or says here why it cannot.
var undeclared = map[string]string{}

// TestEveryOpDeclaresItsSignature checks that every registered op
// declares its data inputs and its outputs (a count, or their names), so
// that Kernel checks them before Build, unless it is on undeclared; and
// that no op on undeclared declares them after all.
func TestEveryOpDeclaresItsSignature(t *testing.T) {
	names := Names()
	if len(names) == 0 {
		t.Fatal("no op is registered")
	}
	for _, name := range names {
		s := Lookup(name)
		declared := s.Inputs.declared && (s.NumOutputs.declared || s.Outputs != nil)
		why, excused := undeclared[name]
		switch {
		case !declared && !excused:
			t.Errorf("%s: its Spec declares no %s", name, map[bool]string{true: "output count", false: "input count"}[s.Inputs.declared])
		case declared && excused:
			t.Errorf("%s declares its signature but is listed as undeclared (%s)", name, why)
		}
	}
	for name := range undeclared {
		if Lookup(name) == nil {
			t.Errorf("undeclared lists %s, which is not registered", name)
		}
	}
}

// TestSpecKernelRefusesUndeclaredReads: a Build that reads a type, type
// list or int attribute its Spec does not declare makes Kernel fail,
// naming the op and the attribute, even where the node carries it;
// reading those it declares, in Types or in a Count, is no error.
func TestSpecKernelRefusesUndeclaredReads(t *testing.T) {
	attrs := map[string]*tfpb.AttrValue{"T": typeAttr(wire.DTFloat), "N": intAttr(2), "U": typeAttr(wire.DTInt32),
		"dtypes": {Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{Type: []tfpb.DataType{tfpb.DataType(wire.DTFloat)}}}}}
	for _, tc := range []struct {
		name string
		read func(n *Node)
		want string // "" for no error
	}{
		{"declared", func(n *Node) { n.typeOf("T"); n.intOf("N"); n.typesOf("dtypes") }, ""},
		{"an undeclared type", func(n *Node) { n.typeOf("U") }, `op TestReads reads type attr "U", which its Spec does not declare`},
		{"a missing type", func(n *Node) { n.typeOf("dtype") }, `op TestReads reads type attr "dtype", which its Spec does not declare`},
		{"an int as a type", func(n *Node) { n.typeOf("N") }, `op TestReads reads type attr "N", which its Spec does not declare`},
		{"a type list as an int", func(n *Node) { n.intOf("dtypes") }, `op TestReads reads int attr "dtypes", which its Spec does not declare`},
		{"an undeclared list", func(n *Node) { n.typeOf("T"); n.typesOf("Tcomponents") }, `op TestReads reads type list attr "Tcomponents"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &Spec{Inputs: byInt("N", 1), Types: []TypeAttr{anyType("T")}, NumOutputs: byList("dtypes"),
				Build: func(_ *Env, n *Node) (Kernel, error) {
					tc.read(n)
					return func(*Context) error { return nil }, nil
				}}
			n := &Node{Name: "n", Op: "TestReads", Attrs: attrs, NumInputs: 2}
			k, err := spec.Kernel(&Env{}, n)
			switch {
			case tc.want == "" && (err != nil || k == nil):
				t.Fatalf("Kernel = %v, %v; want the kernel", k != nil, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || k != nil):
				t.Fatalf("Kernel = %v, %v; want no kernel and %q", k != nil, err, tc.want)
			}
		})
	}
}

// TestEveryOpReadsOnlyDeclaredAttrs builds every registered op on a node
// carrying its defaults and a value of each attribute its Spec declares:
// none reads a type, type list or int attribute beyond those, which
// Kernel would refuse. An op whose Build stops earlier, at an attribute
// of another kind, is logged: the sweep does not reach its reads.
func TestEveryOpReadsOnlyDeclaredAttrs(t *testing.T) {
	built := 0
	for _, name := range Names() {
		s := Lookup(name)
		n := &Node{Name: "n", Op: name, Attrs: declaredAttrs(s)}
		n.NumInputs, _ = s.Inputs.of(n)
		_, err := s.Kernel(&Env{}, n)
		switch {
		case n.misread != nil:
			t.Errorf("%s: %v", name, n.misread)
		case err != nil:
			t.Logf("%s stops before its reads are all seen: %v", name, err)
		default:
			built++
		}
	}
	t.Logf("%d of %d ops built from their declared attributes alone", built, len(Names()))
	if built == 0 {
		t.Fatal("no op was built: the sweep saw no reads")
	}
}

// declaredAttrs are attributes for a node of s: its defaults, and a value
// each attribute it declares allows.
func declaredAttrs(s *Spec) map[string]*tfpb.AttrValue {
	attrs := maps.Clone(s.Defaults)
	if attrs == nil {
		attrs = map[string]*tfpb.AttrValue{}
	}
	for _, c := range []Count{s.Inputs, s.NumOutputs} {
		if c.declared && c.attr != "" && !c.list {
			attrs[c.attr] = intAttr(max(c.min, 1))
		}
	}
	for _, c := range []Count{s.Inputs, s.NumOutputs} {
		if c.declared && c.attr != "" && c.list {
			attrs[c.attr] = typeList(wire.DTFloat)
		}
	}
	for _, a := range s.Types {
		dt := wire.DTFloat
		if a.allowed != nil {
			dt = a.allowed[0]
		}
		if a.list {
			attrs[a.name] = typeList(dt)
		} else {
			attrs[a.name] = typeAttr(dt)
		}
	}
	return attrs
}

// typeList is a type list attribute of dts.
func typeList(dts ...wire.DataType) *tfpb.AttrValue {
	l := &tfpb.AttrValue_ListValue{}
	for _, dt := range dts {
		l.Type = append(l.Type, tfpb.DataType(dt))
	}
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_List{List: l}}
}
