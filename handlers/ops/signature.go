package ops

import (
	"fmt"
	"slices"

	"github.com/starwire/starwire/wire"
)

// What a Spec declares of its nodes' shape, checked by Spec.Kernel before
// Build runs, so that builders do not each repeat the prologue that counts
// the data inputs, reads and checks the type attributes and sets the
// number of outputs. The errors are the attribute readers' and
// wantInputs', in the same words whichever op declares them.

// A Count is a number of data inputs or outputs: a fixed number, or one
// taken from an attribute (an int, or a type list's length), scaled and
// offset, and for inputs optionally a few more that newer versions of an
// op add. The zero Count declares nothing, leaving the check to Build.
type Count struct {
	declared bool
	fixed    int
	attr     string // "" for a fixed count
	list     bool   // attr is a type list, counted by its length
	min      int64  // the least an int attr may be
	per      int    // the count is per·attr + fixed
	optional int    // up to this many more may follow (inputs only)
}

// exactly is a count of k.
func exactly(k int) Count { return Count{declared: true, fixed: k} }

// byInt is the count held by int attribute attr, which must be at least
// min.
func byInt(attr string, min int64) Count {
	return Count{declared: true, attr: attr, min: min, per: 1}
}

// byList is the length of type list attribute attr.
func byList(attr string) Count {
	return Count{declared: true, attr: attr, list: true, per: 1}
}

// plus is c and k more.
func (c Count) plus(k int) Count { c.fixed += k; return c }

// times is c with its attribute's value counted k times.
func (c Count) times(k int) Count { c.per *= k; return c }

// orUpTo is c, or up to k more: trailing inputs that newer versions of an
// op add and its kernel reads only when they are there. Only inputs may
// be optional (registerOp refuses an optional output count).
func (c Count) orUpTo(k int) Count { c.optional += k; return c }

// wantInputs checks that n has the data inputs c counts.
func (c Count) wantInputs(n *Node) error {
	k, err := c.of(n)
	if err != nil {
		return err
	}
	switch {
	case c.optional == 0:
		return n.wantInputs(k)
	case n.NumInputs >= k && n.NumInputs <= k+c.optional:
		return nil
	case c.optional == 1:
		return fmt.Errorf("has %d data inputs, want %d or %d", n.NumInputs, k, k+1)
	default:
		return fmt.Errorf("has %d data inputs, want %d to %d", n.NumInputs, k, k+c.optional)
	}
}

// of is the count for n; its error names the attribute.
func (c Count) of(n *Node) (int, error) {
	if c.attr == "" {
		return c.fixed, nil
	}
	if c.list {
		types, err := n.attrTypeList(c.attr)
		if err != nil {
			return 0, err
		}
		return c.per*len(types) + c.fixed, nil
	}
	v, err := n.attrInt(c.attr)
	if err != nil {
		return 0, err
	}
	if v < c.min {
		return 0, fmt.Errorf("%s is %d, want at least %d", c.attr, v, c.min)
	}
	if v > maxCount {
		return 0, fmt.Errorf("%s is %d, want at most %d", c.attr, v, maxCount)
	}
	return c.per*int(v) + c.fixed, nil
}

// maxCount bounds a count an attribute declares, so that a hostile N
// cannot make the builder allocate without limit.
const maxCount = 1 << 16

// A TypeAttr is a type attribute a node must have, or a type list
// attribute, with the types it may hold.
type TypeAttr struct {
	name    string
	allowed []wire.DataType // nil: any type
	size    sizeRule
	list    bool // a list(type) attribute, each type as above
	min     int  // the least length of a list
}

// A sizeRule says which types an attribute may hold by their layout.
type sizeRule uint8

const (
	anySize        sizeRule = iota
	fixedOnly               // types of fixed size, moved as bytes
	fixedOrStrings          // those and strings: what a tensor may store
)

// anyType is type attribute name, of any type.
func anyType(name string) TypeAttr { return TypeAttr{name: name} }

// typeIn is type attribute name, one of allowed.
func typeIn(name string, allowed ...wire.DataType) TypeAttr {
	return TypeAttr{name: name, allowed: allowed}
}

// fixedSize is type attribute name of an op that moves elements as bytes.
func fixedSize(name string) TypeAttr { return TypeAttr{name: name, size: fixedOnly} }

// storable is type attribute name of an op that keeps tensors of it:
// fixed-size types or strings, not handles.
func storable(name string) TypeAttr { return TypeAttr{name: name, size: fixedOrStrings} }

// listOf is elem made a type list attribute of at least min types, each
// as elem allows.
func listOf(elem TypeAttr, min int) TypeAttr {
	elem.list, elem.min = true, min
	return elem
}

func (a TypeAttr) check(n *Node) error {
	if !a.list {
		dt, err := n.attrType(a.name)
		if err != nil {
			return err
		}
		return a.allows(fmt.Sprintf("attr %q", a.name), dt)
	}
	types, err := n.attrTypeList(a.name)
	if err != nil {
		return err
	}
	if len(types) < a.min {
		return fmt.Errorf("attr %q has %d types, want at least %d", a.name, len(types), a.min)
	}
	for i, dt := range types {
		if err := a.allows(fmt.Sprintf("attr %q[%d]", a.name, i), dt); err != nil {
			return err
		}
	}
	return nil
}

// allows checks one type a; what names it in the error.
func (a TypeAttr) allows(what string, dt wire.DataType) error {
	switch {
	case a.size == fixedOnly && dt.Size() == 0:
		return fmt.Errorf("%s is %v: only fixed-size types are supported", what, dt)
	case a.size == fixedOrStrings && dt != wire.DTString && dt.Size() == 0:
		return fmt.Errorf("%s is %v: only fixed-size types and strings are supported", what, dt)
	case a.allowed != nil && !slices.Contains(a.allowed, dt):
		return fmt.Errorf("%s is %v, want one of %v", what, dt, a.allowed)
	}
	return nil
}

// Kernel checks n against what s declares (its data inputs, then its type
// attributes in order), sets its number of outputs when s declares it, and
// builds its kernel.
func (s *Spec) Kernel(env *Env, n *Node) (Kernel, error) {
	if s.Inputs.declared {
		if err := s.Inputs.wantInputs(n); err != nil {
			return nil, err
		}
	}
	for _, a := range s.Types {
		if err := a.check(n); err != nil {
			return nil, err
		}
	}
	switch {
	case s.NumOutputs.declared:
		k, err := s.NumOutputs.of(n)
		if err != nil {
			return nil, err
		}
		n.NumOutputs = k
	case s.Outputs != nil:
		n.NumOutputs = len(s.Outputs)
	}
	n.spec, n.misread = s, nil
	k, err := s.Build(env, n)
	if n.misread != nil {
		return nil, n.misread
	}
	return k, err
}

// The kinds of attribute a Spec declares, for declares.
const (
	typeKind = "type"
	listKind = "type list"
	intKind  = "int"
)

// declares says whether s declares attribute name as kind: a type or
// type list in Types, an int or type list counting inputs or outputs.
func (s *Spec) declares(name, kind string) bool {
	for _, a := range s.Types {
		if a.name == name && kind == pick(a.list, listKind, typeKind) {
			return true
		}
	}
	for _, c := range []Count{s.Inputs, s.NumOutputs} {
		if c.declared && c.attr == name && kind == pick(c.list, listKind, intKind) {
			return true
		}
	}
	return false
}

// pick is a when cond holds, b otherwise.
func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// undeclared records, unless one is recorded, the error of Build reading
// attribute name as kind where n's spec does not declare it, or where
// (built outside Kernel) n lacks it: read is the reader's own error.
func (n *Node) undeclared(name, kind string, read error) {
	switch {
	case n.misread != nil:
	case n.spec != nil && !n.spec.declares(name, kind):
		n.misread = fmt.Errorf("op %s reads %s attr %q, which its Spec does not declare (a bug in the op's kernel)", n.Op, kind, name)
	case read != nil:
		n.misread = fmt.Errorf("op %s reads %s attr %q: %w", n.Op, kind, name, read)
	}
}

// typeOf is the value of type attribute name, which the spec declares and
// Kernel so checked; reading one it does not declare is Kernel's error.
func (n *Node) typeOf(name string) wire.DataType {
	dt, err := n.attrType(name)
	n.undeclared(name, typeKind, err)
	return dt
}

// typesOf is the value of type list attribute name, which the spec
// declares (in Types, or counting inputs or outputs) and Kernel so
// checked; reading one it does not declare is Kernel's error.
func (n *Node) typesOf(name string) []wire.DataType {
	types, err := n.attrTypeList(name)
	n.undeclared(name, listKind, err)
	return types
}

// intOf is the value of int attribute name, which a declared Count read
// and bounded; reading one it does not declare is Kernel's error.
func (n *Node) intOf(name string) int64 {
	v, err := n.attrInt(name)
	n.undeclared(name, intKind, err)
	return v
}
