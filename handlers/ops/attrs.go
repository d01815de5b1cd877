package ops

import (
	"fmt"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Attribute readers for kernel builders. Their errors name the attribute;
// buildGraph adds the node.

func (n *Node) attr(name string) (*tfpb.AttrValue, error) {
	a := n.Attrs[name]
	if a == nil {
		return nil, fmt.Errorf("missing attr %q", name)
	}
	return a, nil
}

// attrValue reads attribute name, which must hold the oneof case V; what
// names the case in the error. Every typed reader below goes through it so
// that a missing or mistyped attribute is reported the same way.
func attrValue[V any](n *Node, name, what string) (V, error) {
	var zero V
	a, err := n.attr(name)
	if err != nil {
		return zero, err
	}
	v, ok := a.GetValue().(V)
	if !ok {
		return zero, fmt.Errorf("attr %q is not %s", name, what)
	}
	return v, nil
}

func (n *Node) attrType(name string) (wire.DataType, error) {
	v, err := attrValue[*tfpb.AttrValue_Type](n, name, "a type")
	if err != nil {
		return 0, err
	}
	return wire.DataType(v.Type), nil
}

func (n *Node) attrInt(name string) (int64, error) {
	v, err := attrValue[*tfpb.AttrValue_I](n, name, "an int")
	if err != nil {
		return 0, err
	}
	return v.I, nil
}

func (n *Node) attrBool(name string) (bool, error) {
	v, err := attrValue[*tfpb.AttrValue_B](n, name, "a bool")
	if err != nil {
		return false, err
	}
	return v.B, nil
}

func (n *Node) attrString(name string) (string, error) {
	v, err := attrValue[*tfpb.AttrValue_S](n, name, "a string")
	if err != nil {
		return "", err
	}
	return string(v.S), nil
}

// attrShape reads a shape attribute: nil for unknown rank, -1 for unknown
// dimensions.
func (n *Node) attrShape(name string) ([]int64, error) {
	v, err := attrValue[*tfpb.AttrValue_Shape](n, name, "a shape")
	if err != nil {
		return nil, err
	}
	return partialShape(v.Shape), nil
}

func partialShape(s *tfpb.TensorShapeProto) []int64 {
	if s.GetUnknownRank() {
		return nil
	}
	dims := make([]int64, len(s.GetDim()))
	for i, d := range s.GetDim() {
		dims[i] = max(d.GetSize(), -1)
	}
	return dims
}

func (n *Node) attrTypeList(name string) ([]wire.DataType, error) {
	v, err := attrValue[*tfpb.AttrValue_List](n, name, "a list")
	if err != nil {
		return nil, err
	}
	out := make([]wire.DataType, len(v.List.GetType()))
	for i, t := range v.List.GetType() {
		out[i] = wire.DataType(t)
	}
	return out, nil
}

// wantInputs checks the number of data inputs.
func (n *Node) wantInputs(k int) error {
	if n.NumInputs != k {
		return fmt.Errorf("has %d data inputs, want %d", n.NumInputs, k)
	}
	return nil
}

// Attribute values for op defaults.
func typeAttr(dt wire.DataType) *tfpb.AttrValue {
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_Type{Type: tfpb.DataType(dt)}}
}

func boolAttr(b bool) *tfpb.AttrValue { return &tfpb.AttrValue{Value: &tfpb.AttrValue_B{B: b}} }

func intAttr(i int64) *tfpb.AttrValue { return &tfpb.AttrValue{Value: &tfpb.AttrValue_I{I: i}} }

func stringAttr(s string) *tfpb.AttrValue {
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_S{S: []byte(s)}}
}

func unknownShapeAttr() *tfpb.AttrValue {
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_Shape{Shape: &tfpb.TensorShapeProto{UnknownRank: true}}}
}
