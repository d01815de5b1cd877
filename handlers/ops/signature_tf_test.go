package ops

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/starwire/starwire/wire"
)

// notInTensorFlow are the registered ops stock TensorFlow does not have,
// so that no op def judges their Specs: DeepRec's embedding variable and
// incremental checkpoint ops, its lazy sparse Adam, and starwire's own Kv
// ops.
var notInTensorFlow = map[string]bool{
	"IncrSave": true, "InitializeKvVariableOp": true, "KvResourceEvict": true, "KvResourceExport": true,
	"KvResourceGather": true, "KvResourceImportV2": true, "KvResourceIncrImport": true,
	"KvResourceSparseApplyAdagrad": true, "KvResourceSparseApplyAdam": true, "KvResourceStreamExport": true,
	"KvVarHandleOp": true, "KvVarIsInitializedOp": true, "ResourceSparseApplyAdam": true, "SparseApplyAdam": true,
}

// A tfSignature is what testdata/opdefs_tf.json holds of an op's def (see
// testdata/opdefs_gen.py).
type tfSignature struct {
	Inputs, Outputs tfArgs
	Types           map[string]struct {
		List    bool
		Allowed []wire.DataType
	}
}

// tfArgs are an op def's arguments: fixed single tensors, and arguments
// counted by an int attribute or a type list's length.
type tfArgs struct {
	Fixed   int
	Counted []struct {
		Attr string
		List bool
	}
}

// matches reports whether c counts what a declares.
func (a tfArgs) matches(c Count) bool {
	if c.fixed != a.Fixed || c.optional != 0 {
		return false
	}
	if len(a.Counted) == 0 {
		return c.attr == ""
	}
	for _, arg := range a.Counted {
		if arg.Attr != c.attr || arg.List != c.list {
			return false
		}
	}
	return c.per == len(a.Counted)
}

// TestSignaturesMatchTensorFlow checks every Spec against TensorFlow's
// op def of its op, as opdefs_gen.py wrote them from TensorFlow 2.21: the
// data inputs and outputs it declares are the op def's, and each type
// attribute it declares is one of the op def's, of the same kind, each
// type it lists being one the op def allows.
func TestSignaturesMatchTensorFlow(t *testing.T) {
	data, err := os.ReadFile("testdata/opdefs_tf.json")
	if err != nil {
		t.Fatal(err)
	}
	var defs map[string]tfSignature
	if err := json.Unmarshal(data, &defs); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range Names() {
		def, ok := defs[name]
		switch {
		case notInTensorFlow[name]:
			if ok {
				t.Errorf("%s is listed as not in TensorFlow, which defines it", name)
			}
			continue
		case !ok:
			t.Errorf("%s has no op def in testdata/opdefs_tf.json: run testdata/opdefs_gen.py %s", name, name)
			continue
		}
		checked++
		s := Lookup(name)
		if !def.Inputs.matches(s.Inputs) {
			t.Errorf("%s: Spec declares inputs %+v, TensorFlow's op def %+v", name, s.Inputs, def.Inputs)
		}
		outputs := s.NumOutputs
		if !outputs.declared {
			outputs = exactly(len(s.Outputs))
		}
		if !def.Outputs.matches(outputs) {
			t.Errorf("%s: Spec declares outputs %+v, TensorFlow's op def %+v", name, outputs, def.Outputs)
		}
		for _, a := range s.Types {
			tf, ok := def.Types[a.name]
			switch {
			case !ok:
				t.Errorf("%s: Spec declares type attr %q, which TensorFlow's op def lacks", name, a.name)
			case tf.List != a.list:
				t.Errorf("%s: type attr %q is a list in the Spec: %t, in TensorFlow's op def: %t", name, a.name, a.list, tf.List)
			case len(tf.Allowed) > 0:
				for _, dt := range a.allowed {
					if !slices.Contains(tf.Allowed, dt) {
						t.Errorf("%s: type attr %q allows %v, which TensorFlow's op def does not", name, a.name, dt)
					}
				}
			}
		}
	}
	if checked < len(defs) {
		t.Errorf("checked %d ops of the %d in testdata/opdefs_tf.json: some are no longer registered", checked, len(defs))
	}
}
