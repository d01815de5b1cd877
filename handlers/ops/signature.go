package ops

import (
	"fmt"

	"github.com/starwire/starwire/wire"
)

// What a Spec declares of its nodes' shape, checked by Spec.Kernel before
// Build runs, so that builders do not each repeat the prologue that counts
// the data inputs, reads and checks the type attributes and sets the
// number of outputs. The errors are the attribute readers' and
// wantInputs', in the same words whichever op declares them.

// A Count is a number of data inputs or outputs: a fixed number, or one
// taken from an attribute (an int, or a type list's length), scaled and
// offset. The zero Count declares nothing, leaving the check to Build.
type Count struct {
	declared bool
	fixed    int
	attr     string // "" for a fixed count
	list     bool   // attr is a type list, counted by its length
	min      int64  // the least an int attr may be
	per      int    // the count is per·attr + fixed
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

// A TypeAttr is a type attribute a node must have, with the types it may
// hold.
type TypeAttr struct {
	name    string
	allowed []wire.DataType // nil: any type
	fixed   bool            // only types of fixed size (not strings)
}

// anyType is type attribute name, of any type.
func anyType(name string) TypeAttr { return TypeAttr{name: name} }

// typeIn is type attribute name, one of allowed.
func typeIn(name string, allowed ...wire.DataType) TypeAttr {
	return TypeAttr{name: name, allowed: allowed}
}

// fixedSize is type attribute name of an op that moves elements as bytes.
func fixedSize(name string) TypeAttr { return TypeAttr{name: name, fixed: true} }

func (a TypeAttr) check(n *Node) error {
	var err error
	switch {
	case a.fixed:
		_, err = n.fixedType(a.name)
	case a.allowed != nil:
		_, err = n.attrTypeIn(a.name, a.allowed...)
	default:
		_, err = n.attrType(a.name)
	}
	return err
}

// Kernel checks n against what s declares (its data inputs, then its type
// attributes in order), sets its number of outputs when s declares it, and
// builds its kernel.
func (s *Spec) Kernel(env *Env, n *Node) (Kernel, error) {
	if s.Inputs.declared {
		k, err := s.Inputs.of(n)
		if err != nil {
			return nil, err
		}
		if err := n.wantInputs(k); err != nil {
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
	return s.Build(env, n)
}

// typeOf is the value of type attribute name, which the spec declares and
// Kernel so checked.
func (n *Node) typeOf(name string) wire.DataType {
	return wire.DataType(n.Attrs[name].GetType())
}

// intOf is the value of int attribute name, which a declared Count read
// and bounded.
func (n *Node) intOf(name string) int64 { return n.Attrs[name].GetI() }
