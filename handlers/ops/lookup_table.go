package ops

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// TensorFlow's mutable hash tables as resources of the ps, what a graph
// places there for tf.lookup.experimental.MutableHashTable (ops
// MutableHashTableV2 and MutableHashTableOfTensorsV2, table hashtable.go)
// and DenseHashTable (MutableDenseHashTableV2, table densetable.go). The
// ops that use a table are in lookup_ops.go.
//
// Sharing follows TensorFlow's ContainerInfo: a table lives in the Env's
// resource manager under (container, shared_name), or the node's name when
// shared_name is empty and use_node_name_sharing is set (what Python's
// MutableHashTable asks for), so every graph naming it shares one table
// until Cleanup drops its container. With neither, the table is private to
// the kernel that made it and lives as long as its graph.

func init() {
	shared := map[string]*tfpb.AttrValue{"container": stringAttr(""), "shared_name": stringAttr(""), "use_node_name_sharing": boolAttr(false)}
	scalarShape := &tfpb.AttrValue{Value: &tfpb.AttrValue_Shape{Shape: &tfpb.TensorShapeProto{}}}
	withShape := withDefaults(shared, map[string]*tfpb.AttrValue{"value_shape": scalarShape})
	dense := withDefaults(withShape, map[string]*tfpb.AttrValue{"initial_num_buckets": intAttr(131072), "max_load_factor": floatAttr(0.8)})
	// tableAttrs checks that the table's kind has a kernel for the pair.
	types := []TypeAttr{anyType("key_dtype"), anyType("value_dtype")}
	registerOp("MutableHashTableV2", &Spec{Defaults: shared, Inputs: exactly(0), Types: types, NumOutputs: exactly(1), Build: buildTableOp(hashOfScalars)})
	registerOp("MutableHashTableOfTensorsV2", &Spec{Defaults: withShape, Inputs: exactly(0), Types: types, NumOutputs: exactly(1), Build: buildTableOp(hashOfTensors)})
	// empty_key and deleted_key.
	registerOp("MutableDenseHashTableV2", &Spec{Defaults: dense, Inputs: exactly(2), Types: types, NumOutputs: exactly(1), Build: buildTableOp(denseHash)})
}

func floatAttr(f float32) *tfpb.AttrValue { return &tfpb.AttrValue{Value: &tfpb.AttrValue_F{F: f}} }

// A resource is state a handle refers to, other than a variable: a Value
// holding one is a resource handle (see Value.res).
type resource interface {
	resourceName() string
}

// A lookupTable is a hash table resource. Its methods are safe for
// concurrent use; the kernels of lookup_ops.go check their inputs against
// the table's meta before calling them, so that the tables see only keys
// and values of their dtypes and shapes.
type lookupTable interface {
	resource
	meta() *tableMeta
	// find returns the values of keys, of shape outShape, each key's
	// taken from defaults where the table lacks it: defaults holds one
	// value, or one per key.
	find(keys, defaults *wire.Tensor, outShape []int64) (wire.Tensor, error)
	insert(keys, values *wire.Tensor) error
	remove(keys *wire.Tensor) error
	size() int64
	// export returns the table's contents as LookupTableExportV2 has
	// them, one consistent snapshot.
	export() (keys, values wire.Tensor, err error)
	// checkImport checks keys and values for importValues; importValues
	// replaces the table's contents with them, or fails leaving them as
	// they were.
	checkImport(keys, values *wire.Tensor) error
	importValues(keys, values *wire.Tensor) error
}

// A tableKind is the op that makes a table.
type tableKind int

const (
	hashOfScalars tableKind = iota // MutableHashTableV2
	hashOfTensors                  // MutableHashTableOfTensorsV2
	denseHash                      // MutableDenseHashTableV2
)

func (k tableKind) String() string {
	return [...]string{"MutableHashTableV2", "MutableHashTableOfTensorsV2", "MutableDenseHashTableV2"}[k]
}

// tableTypes lists, per kind, the key and value dtypes TensorFlow
// registers a CPU kernel for (lookup_table_op.cc), less Variant and
// ResourceHandle values.
var tableTypes = map[tableKind]map[wire.DataType][]wire.DataType{
	hashOfScalars: {
		wire.DTInt32:  {wire.DTDouble, wire.DTFloat, wire.DTInt32},
		wire.DTInt64:  {wire.DTDouble, wire.DTFloat, wire.DTInt32, wire.DTInt64, wire.DTString},
		wire.DTString: {wire.DTBool, wire.DTDouble, wire.DTFloat, wire.DTInt32, wire.DTInt64},
	},
	hashOfTensors: {
		wire.DTInt32:  {wire.DTDouble, wire.DTFloat, wire.DTInt32},
		wire.DTInt64:  {wire.DTDouble, wire.DTFloat, wire.DTInt32, wire.DTInt64, wire.DTString},
		wire.DTString: {wire.DTBool, wire.DTDouble, wire.DTFloat, wire.DTInt32, wire.DTInt64},
	},
	denseHash: {
		wire.DTInt32:  {wire.DTDouble, wire.DTFloat, wire.DTInt32},
		wire.DTInt64:  {wire.DTBool, wire.DTDouble, wire.DTFloat, wire.DTInt32, wire.DTInt64},
		wire.DTString: {wire.DTBool, wire.DTDouble, wire.DTFloat, wire.DTInt32, wire.DTInt64},
	},
}

// tableMeta is what every table knows of itself; it does not change once
// the table is made.
type tableMeta struct {
	name       string // container/shared_name, for messages
	kind       tableKind
	keyType    wire.DataType
	valueType  wire.DataType
	keyShape   []int64 // of one key: [] but for a dense table of vector keys
	valueShape []int64 // of one value
}

func (m *tableMeta) resourceName() string { return m.name }
func (m *tableMeta) meta() *tableMeta     { return m }

// same reports whether a table made by a node with o's attributes would
// be the table m describes.
func (m *tableMeta) same(o *tableMeta) bool {
	return m.kind == o.kind && m.keyType == o.keyType && m.valueType == o.valueType &&
		slices.Equal(m.keyShape, o.keyShape) && slices.Equal(m.valueShape, o.valueShape)
}

func (m *tableMeta) String() string {
	return fmt.Sprintf("%v %v%v -> %v%v", m.kind, m.keyType, tfShape(m.keyShape), m.valueType, tfShape(m.valueShape))
}

// tables is the part of a Variables that holds resources other than
// variables: lookup tables, and embedding variables (kv_variable.go),
// each kind with names of its own. The zero value is empty and ready.
type tables struct {
	mu sync.Mutex
	m  map[resourceKey]resource
}

type resourceKey struct{ kind, container, name string }

// lookupOrCreateResource returns the resource of kind named (container,
// name), made by make if there is none.
func (ts *tables) lookupOrCreateResource(kind, container, name string, make func() (resource, error)) (resource, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	k := resourceKey{kind, container, name}
	if r := ts.m[k]; r != nil {
		return r, nil
	}
	r, err := make()
	if err != nil {
		return nil, err
	}
	if ts.m == nil {
		ts.m = map[resourceKey]resource{}
	}
	ts.m[k] = r
	return r, nil
}

// lookupOrCreate returns the table named (container, name), made by make
// if there is none. A table of that name made by another op, or with
// other dtypes or shapes, is refused: TensorFlow checks the dtypes alone
// and would hand one node's table to the other.
func (ts *tables) lookupOrCreate(container, name string, want *tableMeta, make func() (lookupTable, error)) (lookupTable, error) {
	r, err := ts.lookupOrCreateResource("table", container, name, func() (resource, error) { return make() })
	if err != nil {
		return nil, err
	}
	t := r.(lookupTable)
	if !t.meta().same(want) {
		return nil, status.Errorf(wire.InvalidArgument, "table %s is %v, the node asks for %v", t.meta().name, t.meta(), want)
	}
	return t, nil
}

// cleanup drops the resources of the named containers, or all of them
// when none is named. Steps still holding one keep using it; the next
// step that names it gets a new, empty one.
func (ts *tables) cleanup(containers []string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for k := range ts.m {
		if len(containers) == 0 || slices.Contains(containers, k.container) {
			delete(ts.m, k)
		}
	}
}

// privateTables numbers kernel-private tables, for their names.
var privateTables atomic.Uint64

// buildTableOp builds the op making a table of kind: its output is the
// table's handle.
func buildTableOp(kind tableKind) func(*Env, *Node) (Kernel, error) {
	return func(env *Env, n *Node) (Kernel, error) {
		m, err := tableAttrs(n, kind)
		if err != nil {
			return nil, err
		}
		container, shared, private, err := tableName(n)
		if err != nil {
			return nil, err
		}
		make, err := tableMaker(n, kind)
		if err != nil {
			return nil, err
		}
		if private {
			return privateTableKernel(m, make), nil
		}
		m.name = container + "/" + shared
		return func(c *Context) error {
			want := m
			if kind == denseHash {
				// The key shape of a dense table is its empty key's.
				k, err := c.typed(0, m.keyType)
				if err != nil {
					return err
				}
				want.keyShape = k.Shape
			}
			t, err := env.Vars.tables.lookupOrCreate(container, shared, &want, func() (lookupTable, error) {
				return make(c, m)
			})
			if err != nil {
				return err
			}
			c.Out[0] = Value{T: wire.Tensor{DType: wire.DTResource}, Set: true, res: t}
			return nil
		}, nil
	}
}

// privateTableKernel is the kernel of a table no other node shares: made
// by its first run, kept by the kernel.
func privateTableKernel(m tableMeta, make func(*Context, tableMeta) (lookupTable, error)) Kernel {
	var mu sync.Mutex
	var t lookupTable
	return func(c *Context) error {
		mu.Lock()
		defer mu.Unlock()
		if t == nil {
			m.name = fmt.Sprintf("_%d_%s", privateTables.Add(1), m.name)
			var err error
			if t, err = make(c, m); err != nil {
				return err
			}
		}
		c.Out[0] = Value{T: wire.Tensor{DType: wire.DTResource}, Set: true, res: t}
		return nil
	}
}

// tableName returns where the table lives, as TensorFlow's ContainerInfo
// decides it, or private when it is the kernel's own.
func tableName(n *Node) (container, shared string, private bool, err error) {
	if container, err = n.attrString("container"); err != nil {
		return "", "", false, err
	}
	if shared, err = n.attrString("shared_name"); err != nil {
		return "", "", false, err
	}
	byNode, err := n.attrBool("use_node_name_sharing")
	if err != nil {
		return "", "", false, err
	}
	if shared == "" {
		if !byNode {
			return container, "", true, nil
		}
		shared = n.Name
	}
	return container, shared, false, nil
}

// tableAttrs reads and checks the dtypes and value shape of a table op.
// The key shape of a dense table is its empty key's, known when it runs.
func tableAttrs(n *Node, kind tableKind) (tableMeta, error) {
	m := tableMeta{name: n.Name, kind: kind, keyShape: []int64{}, valueShape: []int64{}}
	m.keyType, m.valueType = n.typeOf("key_dtype"), n.typeOf("value_dtype")
	var err error
	if !slices.Contains(tableTypes[kind][m.keyType], m.valueType) {
		return m, status.Errorf(wire.NotFound, "no %v kernel for key_dtype %v and value_dtype %v; it takes %v", kind, m.keyType, m.valueType, typePairs(kind))
	}
	if kind == hashOfScalars {
		return m, nil
	}
	if m.valueShape, err = n.attrShape("value_shape"); err != nil {
		return m, err
	}
	switch {
	case m.valueShape == nil || slices.Contains(m.valueShape, -1):
		return m, fmt.Errorf("value_shape %v is not fully defined", m.valueShape)
	case kind == hashOfTensors && len(m.valueShape) != 1:
		return m, status.Errorf(wire.InvalidArgument, "default value must be a vector, got shape %v", tfShape(m.valueShape))
	case kind == denseHash && len(m.valueShape) > 1:
		return m, status.Errorf(wire.InvalidArgument, "empty value must be a scalar or a vector, got shape %v", tfShape(m.valueShape))
	}
	return m, nil
}

// typePairs lists the dtypes a kind takes, for errors.
func typePairs(kind tableKind) string {
	s := ""
	for _, k := range []wire.DataType{wire.DTInt32, wire.DTInt64, wire.DTString} {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%v keys to %v", k, tableTypes[kind][k])
	}
	return s
}

// tableMaker returns what makes a table of kind for node n when it first
// runs; a dense table reads its empty and deleted keys then.
func tableMaker(n *Node, kind tableKind) (func(*Context, tableMeta) (lookupTable, error), error) {
	if kind != denseHash {
		return func(_ *Context, m tableMeta) (lookupTable, error) { return newHashTable(m) }, nil
	}
	buckets, err := n.attrInt("initial_num_buckets")
	if err != nil {
		return nil, err
	}
	a, err := attrValue[*tfpb.AttrValue_F](n, "max_load_factor", "a float")
	if err != nil {
		return nil, err
	}
	load := a.F
	if !(load > 0 && load < 1) {
		return nil, status.Errorf(wire.InvalidArgument, "max_load_factor must be between 0 and 1, got: %v", load)
	}
	if err := checkBuckets(buckets); err != nil {
		return nil, err
	}
	return func(c *Context, m tableMeta) (lookupTable, error) {
		var in [2]*wire.Tensor
		if err := c.typedInputs(m.keyType, in[:]); err != nil {
			return nil, err
		}
		return newDenseTable(m, in[0], in[1], buckets, load)
	}, nil
}

// table returns the table input i refers to.
func (c *Context) table(i int) (lookupTable, error) {
	t, ok := c.In[i].res.(lookupTable)
	if !ok {
		return nil, status.Errorf(wire.InvalidArgument, "input %d is not a lookup table handle", i)
	}
	return t, nil
}
