package ops_test

import (
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// stringsOf returns a string tensor; its memory is the garbage collector's.
func stringsOf(shape []int64, vals ...string) wire.Tensor {
	elems := make([][]byte, len(vals))
	for i, v := range vals {
		elems[i] = []byte(v)
	}
	return wire.Tensor{DType: wire.DTString, Shape: shape, Data: wire.AppendStrings(nil, elems)}
}

// constBools is a Const of bools.
func constBools(name string, shape []int64, vals ...bool) *tfpb.NodeDef {
	return NodeDef(name, "Const", nil, Attrs("dtype", wire.DTBool, "value",
		&tfpb.TensorProto{Dtype: tfpb.DataType_DT_BOOL, TensorShape: tensor.ShapeToProto(shape), BoolVal: vals}))
}
