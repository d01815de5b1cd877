package graph

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// Function calls are inlined when a graph is built, as TensorFlow's
// function inlining pass does with the calls a partition holds: a call node
// C of function F (a node whose op is F, or a PartitionedCall or
// StatefulPartitionedCall whose attribute f names F) becomes F's body, its
// nodes renamed "C/<node>" and its attribute placeholders bound to the
// call's attributes, and an IdentityN named C that outputs F's results, so
// that C's consumers, by data or control edge, are unchanged. The IdentityN
// also waits, by control edges, for F's control outputs and for every body
// node nothing else consumes, so that a control dependency on C covers F's
// side effects; every body node waits for C's control inputs.
// Calls in bodies, by name or through PartitionedCall and
// StatefulPartitionedCall as TensorFlow 2 writes them, are inlined in turn,
// to any depth up to maxCallDepth; a function that calls itself, directly
// or through others, is refused.

// maxInlined bounds the nodes inlining may make, so that a library of
// functions calling each other many times over cannot exhaust memory.
const maxInlined = 1 << 20

// maxCallDepth bounds how deeply calls may nest. A SavedModel's functions
// nest a few levels (signature wrapper, __call__, layers); the bound keeps
// a long chain of distinct functions, which the recursion check lets
// through, from growing the stack and the node names without limit.
const maxCallDepth = 64

// isCallOp reports whether op calls the function its attribute f names.
func isCallOp(op string) bool { return op == "PartitionedCall" || op == "StatefulPartitionedCall" }

// A library is a partition's function library, by name.
type library struct {
	fns map[string]*tfpb.FunctionDef
	// origin says where an inlined node came from, for errors.
	origin map[string]string
	made   int
	host   string // for TensorFlow's NotFound message
}

func newLibrary(lib *tfpb.FunctionDefLibrary, host string) (*library, error) {
	l := &library{fns: make(map[string]*tfpb.FunctionDef), origin: make(map[string]string), host: host}
	for _, f := range lib.GetFunction() {
		name := f.GetSignature().GetName()
		if name == "" {
			return nil, status.Errorf(wire.InvalidArgument, "RegisterGraph: a function of the library has no name")
		}
		if _, dup := l.fns[name]; dup {
			return nil, status.Errorf(wire.InvalidArgument, "RegisterGraph: function %q is defined twice", name)
		}
		l.fns[name] = f
	}
	return l, nil
}

// function returns the function n calls and the attributes it binds, or
// nil when n is no call.
func (l *library) function(n *tfpb.NodeDef) (*tfpb.FunctionDef, map[string]*tfpb.AttrValue, error) {
	if f := l.fns[n.GetOp()]; f != nil {
		return f, n.GetAttr(), nil
	}
	if !isCallOp(n.GetOp()) {
		return nil, nil, nil
	}
	fa := n.GetAttr()["f"].GetFunc()
	if fa == nil {
		return nil, nil, graphError(n, "attr \"f\" is not a function")
	}
	f := l.fns[fa.GetName()]
	if f == nil {
		return nil, nil, status.Errorf(wire.NotFound, "RegisterGraph: node %q (%s) calls function %q, which the library does not define", n.GetName(), n.GetOp(), fa.GetName())
	}
	return f, fa.GetAttr(), nil
}

// expand returns the nodes of def with every call inlined.
func (l *library) expand(def *tfpb.GraphDef) ([]*tfpb.NodeDef, error) {
	out := make([]*tfpb.NodeDef, 0, len(def.GetNode()))
	for _, n := range def.GetNode() {
		var err error
		if out, err = l.inline(out, n, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// inline appends n, or, when n calls a function, its inlined body, to out;
// stack holds the functions being inlined around n.
func (l *library) inline(out []*tfpb.NodeDef, n *tfpb.NodeDef, stack []string) ([]*tfpb.NodeDef, error) {
	f, attrs, err := l.function(n)
	if err != nil || f == nil {
		return append(out, n), err
	}
	name := f.GetSignature().GetName()
	if slices.Contains(stack, name) {
		return nil, status.Errorf(wire.InvalidArgument, "RegisterGraph: node %q calls function %q recursively (%s)", n.GetName(), name, strings.Join(append(stack, name), " -> "))
	}
	if len(stack) >= maxCallDepth {
		return nil, status.Errorf(wire.InvalidArgument, "RegisterGraph: node %q calls function %q nested %d calls deep, over the limit of %d (%s)", n.GetName(), name, len(stack)+1, maxCallDepth, strings.Join(append(stack, name), " -> "))
	}
	if l.made += len(f.GetNodeDef()) + 1; l.made > maxInlined {
		return nil, status.Errorf(wire.ResourceExhausted, "RegisterGraph: inlining function %q at node %q makes over %d nodes", name, n.GetName(), maxInlined)
	}
	in, err := l.instantiate(f, attrs, n)
	if err != nil {
		return nil, err
	}
	stack = append(stack, name)
	for _, b := range in.body {
		if out, err = l.inline(out, b, stack); err != nil {
			return nil, err
		}
	}
	return append(out, in.call), nil
}

// An instance is a function's body bound to one call, and the IdentityN
// that stands for the call.
type instance struct {
	body []*tfpb.NodeDef
	call *tfpb.NodeDef
}

// bodyError is the error of body node b of function f inlined at call.
func bodyError(call *tfpb.NodeDef, f *tfpb.FunctionDef, b *tfpb.NodeDef, format string, args ...any) error {
	return status.Errorf(wire.InvalidArgument, "RegisterGraph: node %q (%s): function %q, node %q (%s): %s",
		call.GetName(), call.GetOp(), f.GetSignature().GetName(), b.GetName(), b.GetOp(), fmt.Sprintf(format, args...))
}

// instantiate binds f to call: attributes, arguments and results.
func (l *library) instantiate(f *tfpb.FunctionDef, callAttrs map[string]*tfpb.AttrValue, call *tfpb.NodeDef) (*instance, error) {
	sig := f.GetSignature()
	fname := sig.GetName()
	callErr := func(format string, args ...any) error {
		return status.Errorf(wire.InvalidArgument, "RegisterGraph: node %q (%s) calling function %q: %s", call.GetName(), call.GetOp(), fname, fmt.Sprintf(format, args...))
	}
	bound := make(map[string]*tfpb.AttrValue)
	for _, a := range sig.GetAttr() {
		if v := callAttrs[a.GetName()]; v != nil {
			bound[a.GetName()] = v
		} else if d := a.GetDefaultValue(); d != nil {
			bound[a.GetName()] = d
		} else {
			return nil, callErr("attr %q is not set", a.GetName())
		}
	}
	var data, controls []string
	for _, in := range call.GetInput() {
		if strings.HasPrefix(in, "^") {
			controls = append(controls, in)
		} else {
			data = append(data, in)
		}
	}
	// args maps each input argument to the caller's tensors it stands for.
	args := make(map[string][]string)
	next := 0
	for _, a := range sig.GetInputArg() {
		k, err := argCount(a, bound)
		if err != nil {
			return nil, callErr("input %q: %v", a.GetName(), err)
		}
		if next+k > len(data) {
			return nil, callErr("has %d data inputs, the function takes more", len(data))
		}
		args[a.GetName()] = data[next : next+k]
		next += k
	}
	if next != len(data) {
		return nil, callErr("has %d data inputs, the function takes %d", len(data), next)
	}
	prefix := call.GetName() + "/"
	byName := make(map[string]*tfpb.NodeDef, len(f.GetNodeDef()))
	for _, b := range f.GetNodeDef() {
		if _, dup := byName[b.GetName()]; dup || b.GetName() == "" {
			return nil, bodyError(call, f, b, "duplicate or empty node name")
		}
		byName[b.GetName()] = b
	}
	for _, b := range f.GetNodeDef() {
		if l.fns[b.GetOp()] == nil && !isCallOp(b.GetOp()) && ops.Lookup(b.GetOp()) == nil {
			return nil, status.Errorf(wire.NotFound, "Op type not registered '%s' in binary running on %s. Make sure the Op and Kernel are registered in the binary running in this process. (RegisterGraph: function %q, node %q, inlined at node %q)",
				b.GetOp(), l.host, fname, b.GetName(), call.GetName())
		}
	}
	in := &instance{}
	consumed := make(map[string]bool)
	for _, b := range f.GetNodeDef() {
		nb := &tfpb.NodeDef{Name: prefix + b.GetName(), Op: b.GetOp(), Device: call.GetDevice(), Attr: make(map[string]*tfpb.AttrValue, len(b.GetAttr()))}
		for k, v := range b.GetAttr() {
			sv, err := substitute(v, bound)
			if err != nil {
				return nil, bodyError(call, f, b, "attr %q: %v", k, err)
			}
			nb.Attr[k] = sv
		}
		var ctl []string
		for _, i := range b.GetInput() {
			if c, ok := strings.CutPrefix(i, "^"); ok {
				if byName[c] == nil {
					return nil, bodyError(call, f, b, "control input %q: no such node", i)
				}
				consumed[c] = true
				ctl = append(ctl, "^"+prefix+c)
				continue
			}
			src, err := l.resolve(i, byName, args, prefix, consumed, bound)
			if err != nil {
				return nil, bodyError(call, f, b, "input %q: %v", i, err)
			}
			nb.Input = append(nb.Input, src)
		}
		// Every body node waits for the call's control inputs, as the
		// arguments' nodes do in TensorFlow's inlining.
		ctl = append(ctl, controls...)
		nb.Input = append(nb.Input, ctl...)
		l.origin[nb.Name] = fmt.Sprintf("function %q, node %q, inlined at node %q", fname, b.GetName(), call.GetName())
		in.body = append(in.body, nb)
	}
	// The call: an IdentityN of the results.
	var types []tfpb.DataType
	var results []string
	for _, a := range sig.GetOutputArg() {
		ret, ok := f.GetRet()[a.GetName()]
		if !ok {
			return nil, callErr("output %q has no ret", a.GetName())
		}
		k, err := argCount(a, bound)
		if err != nil {
			return nil, callErr("output %q: %v", a.GetName(), err)
		}
		ts, err := argTypes(a, bound, k)
		if err != nil {
			return nil, callErr("output %q: %v", a.GetName(), err)
		}
		types = append(types, ts...)
		for j := range k {
			r := ret
			if k > 1 {
				r = retElement(ret, j)
			}
			src, err := l.resolve(r, byName, args, prefix, consumed, bound)
			if err != nil {
				return nil, callErr("output %q: ret %q: %v", a.GetName(), r, err)
			}
			results = append(results, src)
		}
	}
	for _, c := range sortedValues(f.GetControlRet()) {
		if byName[c] == nil {
			return nil, callErr("control output %q: no such node", c)
		}
		consumed[c] = false // listed below
		results = append(results, "^"+prefix+c)
	}
	for _, b := range f.GetNodeDef() {
		if _, seen := consumed[b.GetName()]; !seen {
			results = append(results, "^"+prefix+b.GetName())
		}
	}
	// A call without results or body still waits for its controls.
	if len(f.GetNodeDef()) == 0 {
		results = append(results, controls...)
	}
	in.call = &tfpb.NodeDef{Name: call.GetName(), Op: "IdentityN", Device: call.GetDevice(), Input: results,
		Attr: map[string]*tfpb.AttrValue{"T": {Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{Type: types}}}}}
	return in, nil
}

// retElement names element j of a list result "node:out:i": "node:out:i+j".
func retElement(ret string, j int) string {
	if i := strings.LastIndexByte(ret, ':'); i >= 0 && strings.Count(ret, ":") == 2 {
		if k, err := strconv.Atoi(ret[i+1:]); err == nil {
			return ret[:i+1] + strconv.Itoa(k+j)
		}
	}
	return ret + ":" + strconv.Itoa(j)
}

func sortedValues(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = m[k]
	}
	return vals
}

// resolve turns a body input into the graph's name for it: an argument
// ("x", or "x:i" of a list argument) is the caller's tensor; "node:out:i"
// is output port of the inlined node, counting the outputs of out's
// argument and those before it.
func (l *library) resolve(ref string, byName map[string]*tfpb.NodeDef, args map[string][]string, prefix string, consumed map[string]bool, bound map[string]*tfpb.AttrValue) (string, error) {
	parts := strings.Split(ref, ":")
	if ts, ok := args[parts[0]]; ok && len(parts) <= 2 {
		i := 0
		if len(parts) == 2 {
			var err error
			if i, err = strconv.Atoi(parts[1]); err != nil {
				return "", fmt.Errorf("bad index")
			}
		}
		if i < 0 || i >= len(ts) {
			return "", fmt.Errorf("argument %q has %d tensors", parts[0], len(ts))
		}
		return ts[i], nil
	}
	src := byName[parts[0]]
	if src == nil {
		return "", fmt.Errorf("no such node or argument")
	}
	consumed[parts[0]] = true
	switch len(parts) {
	case 1:
		return prefix + parts[0], nil
	case 3:
	default:
		return "", fmt.Errorf("want node:output:index")
	}
	i, err := strconv.Atoi(parts[2])
	if err != nil || i < 0 {
		return "", fmt.Errorf("bad index")
	}
	port, err := l.outputPort(src, parts[1], i, bound)
	if err != nil {
		return "", err
	}
	return prefix + parts[0] + ":" + strconv.Itoa(port), nil
}

// outputPort is the port of element i of output argument out of node n.
func (l *library) outputPort(n *tfpb.NodeDef, out string, i int, bound map[string]*tfpb.AttrValue) (int, error) {
	if isCallOp(n.GetOp()) {
		// A PartitionedCall's one output argument, "output", lists
		// every result of the function: "call:output:i" is port i. Its
		// function is looked up when the call is inlined.
		if out != "output" {
			return 0, fmt.Errorf("%s has no output %q", n.GetOp(), out)
		}
		return i, nil
	}
	f, attrs, err := l.function(n)
	if err != nil {
		return 0, err
	}
	if f != nil {
		// The callee's attributes may be placeholders of the caller's.
		sub := make(map[string]*tfpb.AttrValue, len(attrs))
		for k, v := range attrs {
			if sub[k], err = substitute(v, bound); err != nil {
				return 0, err
			}
		}
		port := 0
		for _, a := range f.GetSignature().GetOutputArg() {
			k, err := argCount(a, sub)
			if err != nil {
				return 0, err
			}
			if a.GetName() == out {
				if i >= k {
					return 0, fmt.Errorf("output %q has %d tensors", out, k)
				}
				return port + i, nil
			}
			port += k
		}
		return 0, fmt.Errorf("function %q has no output %q", f.GetSignature().GetName(), out)
	}
	spec := ops.Lookup(n.GetOp())
	if spec == nil {
		return 0, status.Errorf(wire.NotFound, "Op type not registered '%s'", n.GetOp())
	}
	if spec.Outputs == nil {
		return i, nil
	}
	j := slices.Index(spec.Outputs, out)
	if j < 0 || i != 0 {
		return 0, fmt.Errorf("%s has no output %s:%d", n.GetOp(), out, i)
	}
	return j, nil
}

// argCount is how many tensors an argument holds under bound attributes.
func argCount(a *tfpb.OpDef_ArgDef, bound map[string]*tfpb.AttrValue) (int, error) {
	switch {
	case a.GetNumberAttr() != "":
		v, ok := bound[a.GetNumberAttr()].GetValue().(*tfpb.AttrValue_I)
		if !ok || v.I < 0 || v.I > 1<<16 {
			return 0, fmt.Errorf("number attr %q is not a count", a.GetNumberAttr())
		}
		return int(v.I), nil
	case a.GetTypeListAttr() != "":
		v, ok := bound[a.GetTypeListAttr()].GetValue().(*tfpb.AttrValue_List)
		if !ok {
			return 0, fmt.Errorf("type list attr %q is not a list", a.GetTypeListAttr())
		}
		return len(v.List.GetType()), nil
	}
	return 1, nil
}

// argTypes are the k types of an argument.
func argTypes(a *tfpb.OpDef_ArgDef, bound map[string]*tfpb.AttrValue, k int) ([]tfpb.DataType, error) {
	if a.GetTypeListAttr() != "" {
		return bound[a.GetTypeListAttr()].GetList().GetType(), nil
	}
	t := a.GetType()
	if a.GetTypeAttr() != "" {
		v, ok := bound[a.GetTypeAttr()].GetValue().(*tfpb.AttrValue_Type)
		if !ok {
			return nil, fmt.Errorf("type attr %q is not a type", a.GetTypeAttr())
		}
		t = v.Type
	}
	out := make([]tfpb.DataType, k)
	for i := range out {
		out[i] = t
	}
	return out, nil
}

// substitute replaces an attribute placeholder ("$T" in a body, bound to
// the call's T) by its value, also inside a function attribute's own.
func substitute(v *tfpb.AttrValue, bound map[string]*tfpb.AttrValue) (*tfpb.AttrValue, error) {
	if p := v.GetPlaceholder(); p != "" {
		b := bound[p]
		if b == nil {
			return nil, fmt.Errorf("placeholder %q is not bound", p)
		}
		return b, nil
	}
	if fn := v.GetFunc(); fn != nil && len(fn.GetAttr()) > 0 {
		out := &tfpb.NameAttrList{Name: fn.GetName(), Attr: make(map[string]*tfpb.AttrValue, len(fn.GetAttr()))}
		for k, a := range fn.GetAttr() {
			s, err := substitute(a, bound)
			if err != nil {
				return nil, err
			}
			out.Attr[k] = s
		}
		return &tfpb.AttrValue{Value: &tfpb.AttrValue_Func{Func: out}}, nil
	}
	return v, nil
}
