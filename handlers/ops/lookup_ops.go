package ops

import (
	"slices"
	"strconv"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// The ops on a lookup table (lookup_table.go), with TensorFlow's checks
// (lookup_interface.cc): the dtypes the node names are the table's, keys
// end with the table's key shape, values and defaults have the shape the
// keys call for. A refused call changes nothing and names the table.
//
// A Saver saves a table through LookupTableExportV2 into SaveV2, as the
// tensors "<table>-keys" and "<table>-values", and restores it through
// RestoreV2 into LookupTableImportV2: the checkpoint is TensorFlow's.

func init() {
	// The table, then keys and values (or defaults), of the types the
	// node names; tableAndTypes checks them against the table's.
	keysValues := []TypeAttr{anyType("Tin"), anyType("Tout")}
	registerOp("LookupTableFindV2", &Spec{Inputs: exactly(3), Types: keysValues, NumOutputs: exactly(1), Build: buildLookupFind})
	registerOp("LookupTableInsertV2", &Spec{Inputs: exactly(3), Types: keysValues, NumOutputs: exactly(0), Build: buildLookupWrite(false)})
	registerOp("LookupTableImportV2", &Spec{Inputs: exactly(3), Types: keysValues, NumOutputs: exactly(0), Build: buildLookupWrite(true)})
	registerOp("LookupTableRemoveV2", &Spec{Inputs: exactly(2), Types: []TypeAttr{anyType("Tin")}, NumOutputs: exactly(0), Build: buildLookupRemove})
	registerOp("LookupTableSizeV2", &Spec{Inputs: exactly(1), NumOutputs: exactly(1), Build: buildLookupSize})
	registerOp("LookupTableExportV2", &Spec{Inputs: exactly(1), Types: []TypeAttr{anyType("Tkeys"), anyType("Tvalues")},
		Build: buildLookupExport, Outputs: []string{"keys", "values"}})
}

// tableAndTypes returns input 0's table after checking that the dtypes a
// node names for its keys and values (DTInvalid: none) are the table's.
func tableAndTypes(c *Context, keyType, valueType wire.DataType) (lookupTable, error) {
	t, err := c.table(0)
	if err != nil {
		return nil, err
	}
	m := t.meta()
	if (keyType != wire.DTInvalid && keyType != m.keyType) || (valueType != wire.DTInvalid && valueType != m.valueType) {
		return nil, status.Errorf(wire.InvalidArgument, "table %s holds %v keys and %v values, the node names %v and %v", m.name, m.keyType, m.valueType, keyType, valueType)
	}
	return t, nil
}

// checkKeyTypes checks the dtypes of keys and of values (or defaults).
func checkKeyTypes(m *tableMeta, keys, values *wire.Tensor) error {
	if keys.DType != m.keyType {
		return status.Errorf(wire.InvalidArgument, "table %s: key must be type %v but got %v", m.name, m.keyType, keys.DType)
	}
	if values != nil && values.DType != m.valueType {
		return status.Errorf(wire.InvalidArgument, "table %s: value must be type %v but got %v", m.name, m.valueType, values.DType)
	}
	return nil
}

// checkKeyShape checks that keys' shape ends with the table's key shape.
func checkKeyShape(m *tableMeta, keys *wire.Tensor) error {
	k, s := len(m.keyShape), keys.Shape
	if len(s) < k || !slices.Equal(s[len(s)-k:], m.keyShape) {
		return status.Errorf(wire.InvalidArgument, "table %s: input key shape %v must end with the table's key shape %v", m.name, tfShape(s), tfShape(m.keyShape))
	}
	return nil
}

// valuesShape is the shape of the values of keys of shape keyShape: each
// key's own dimensions replaced by a value's.
func valuesShape(m *tableMeta, keyShape []int64) []int64 {
	s := make([]int64, 0, len(keyShape)-len(m.keyShape)+len(m.valueShape))
	s = append(s, keyShape[:len(keyShape)-len(m.keyShape)]...)
	return append(s, m.valueShape...)
}

func buildLookupFind(_ *Env, n *Node) (Kernel, error) {
	tin, tout := n.typeOf("Tin"), n.typeOf("Tout")
	return func(c *Context) error {
		t, err := tableAndTypes(c, tin, tout)
		if err != nil {
			return err
		}
		keys, def, err := c.twoInputs()
		if err != nil {
			return err
		}
		m := t.meta()
		if err := checkKeyTypes(m, keys, def); err != nil {
			return err
		}
		if err := checkKeyShape(m, keys); err != nil {
			return err
		}
		out := valuesShape(m, keys.Shape)
		if !sameShape(def.Shape, m.valueShape) && !sameShape(def.Shape, out) {
			return status.Errorf(wire.InvalidArgument, "table %s: expected shape %v or %v for default value, got %v", m.name, tfShape(m.valueShape), tfShape(out), tfShape(def.Shape))
		}
		v, err := t.find(keys, def, out)
		if err != nil {
			return err
		}
		c.setOut(0, v)
		return nil
	}, nil
}

// twoInputs returns inputs 1 and 2, the tensors of the ops that take a
// table and two more.
func (c *Context) twoInputs() (*wire.Tensor, *wire.Tensor, error) {
	a, err := c.input(1)
	if err != nil {
		return nil, nil, err
	}
	b, err := c.input(2)
	if err != nil {
		return nil, nil, err
	}
	return a, b, nil
}

// buildLookupWrite builds LookupTableInsertV2 and, with replace,
// LookupTableImportV2, which first empties the table (a restore).
func buildLookupWrite(replace bool) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		tin, tout := n.typeOf("Tin"), n.typeOf("Tout")
		return func(c *Context) error {
			t, err := tableAndTypes(c, tin, tout)
			if err != nil {
				return err
			}
			keys, values, err := c.twoInputs()
			if err != nil {
				return err
			}
			if replace {
				if err := t.checkImport(keys, values); err != nil {
					return err
				}
				return t.importValues(keys, values)
			}
			if err := checkKeysAndValues(t.meta(), keys, values); err != nil {
				return err
			}
			return t.insert(keys, values)
		}, nil
	}
}

func buildLookupRemove(_ *Env, n *Node) (Kernel, error) {
	tin := n.typeOf("Tin")
	return func(c *Context) error {
		t, err := tableAndTypes(c, tin, wire.DTInvalid)
		if err != nil {
			return err
		}
		keys, err := c.input(1)
		if err != nil {
			return err
		}
		if err := checkKeyTypes(t.meta(), keys, nil); err != nil {
			return err
		}
		if err := checkKeyShape(t.meta(), keys); err != nil {
			return err
		}
		return t.remove(keys)
	}, nil
}

func buildLookupSize(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		t, err := c.table(0)
		if err != nil {
			return err
		}
		out, err := tensor.New(wire.DTInt64, nil)
		if err != nil {
			return err
		}
		tensor.View[int64](out.Data)[0] = t.size()
		c.setOut(0, out)
		return nil
	}, nil
}

func buildLookupExport(_ *Env, n *Node) (Kernel, error) {
	tk, tv := n.typeOf("Tkeys"), n.typeOf("Tvalues")
	return func(c *Context) error {
		t, err := tableAndTypes(c, tk, tv)
		if err != nil {
			return err
		}
		keys, values, err := t.export()
		if err != nil {
			return err
		}
		c.setOut(0, keys)
		c.setOut(1, values)
		return nil
	}, nil
}

// A tfShape prints a shape as TensorFlow's messages do: [3,4].
type tfShape []int64

func (s tfShape) String() string {
	b := []byte{'['}
	for i, d := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d, 10)
	}
	return string(append(b, ']'))
}
