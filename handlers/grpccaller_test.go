package handlers

import (
	"testing"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestTensorViewStrings checks that strings a TensorFlow worker answers
// RecvTensor with, in tensor_content, decode to their values and that a
// list whose lengths run past its bytes is refused.
func TestTensorViewStrings(t *testing.T) {
	p := &tfpb.TensorProto{
		Dtype:         tfpb.DataType_DT_STRING,
		TensorShape:   tensor.ShapeToProto([]int64{2}),
		TensorContent: tensor.AppendStringList(nil, [][]byte{[]byte("ab"), []byte("cde")}),
	}
	got, err := tensorView(p)
	if err != nil {
		t.Fatal(err)
	}
	elems, err := got.Strings(nil)
	if err != nil || len(elems) != 2 || string(elems[0]) != "ab" || string(elems[1]) != "cde" {
		t.Fatalf("strings %q, %v; want [ab cde]", elems, err)
	}
	p.TensorContent = []byte("\x02\x09abc")
	if got, err := tensorView(p); err == nil {
		t.Fatalf("lengths past the content decoded to %v%v %q", got.DType, got.Shape, got.Data)
	}
}
