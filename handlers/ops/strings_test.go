package ops_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Strs returns a string tensor, which the test releases.
func Strs(shape []int64, vals ...string) wire.Tensor {
	elems := make([][]byte, len(vals))
	size := 0
	for i, v := range vals {
		elems[i] = []byte(v)
		size += len(v) + 10
	}
	buf := wire.NewBuffer(size)
	return wire.Tensor{DType: wire.DTString, Shape: shape, Data: wire.AppendStrings(buf.Bytes()[:0], elems), Buf: buf}
}

// ConstStrList is a Const of strings whose value holds them in
// tensor_content, in TensorFlow's encoded string list, as a TensorFlow
// client's graphs do.
func ConstStrList(name string, shape []int64, vals ...string) *tfpb.NodeDef {
	elems := make([][]byte, len(vals))
	for i, v := range vals {
		elems[i] = []byte(v)
	}
	p := &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: tensor.ShapeToProto(shape), TensorContent: tensor.AppendStringList(nil, elems)}
	return NodeDef(name, "Const", nil, Attrs("dtype", wire.DTString, "value", p))
}

func TestStringOps(t *testing.T) {
	runCases(t, []opCase{
		{"ShardedFilename", []*tfpb.NodeDef{
			ConstStr("base", nil, "ckpt/model_temp/part"), ConstI32("shard", nil, 1), ConstI32("num", nil, 12),
			NodeDef("out", "ShardedFilename", In("base", "shard", "num"), nil),
		}, []string{"out"}, []wire.Tensor{Strs(nil, "ckpt/model_temp/part-00001-of-00012")}},
		{"ShardedFilename of vectors of one", []*tfpb.NodeDef{
			ConstStr("base", []int64{1}, "m"), ConstI32("shard", []int64{1}, 123456), ConstI32("num", nil, 2),
			NodeDef("out", "ShardedFilename", In("base", "shard", "num"), nil),
		}, []string{"out"}, []wire.Tensor{Strs(nil, "m-123456-of-00002")}},
		{"ShardedFilespec", []*tfpb.NodeDef{
			ConstStr("base", nil, "m"), ConstI32("num", nil, 3),
			NodeDef("out", "ShardedFilespec", In("base", "num"), nil),
		}, []string{"out"}, []wire.Tensor{Strs(nil, "m-?????-of-00003")}},
		{"StringJoin of scalars", []*tfpb.NodeDef{
			ConstStrList("prefix", nil, "/ckpt/model.ckpt"), ConstStr("suffix", nil, "_temp/part"),
			NodeDef("out", "StringJoin", In("prefix", "suffix"), Attrs("N", int64(2))),
		}, []string{"out"}, []wire.Tensor{Strs(nil, "/ckpt/model.ckpt_temp/part")}},
		{"StringJoin broadcasts scalars", []*tfpb.NodeDef{
			ConstStr("a", []int64{2, 2}, "w", "x", "y", "z"), ConstStr("sep", nil, "-"), ConstStrList("b", []int64{2, 2}, "1", "2", "3", ""),
			NodeDef("out", "StringJoin", In("a", "sep", "b"), Attrs("N", int64(3), "separator", "/")),
		}, []string{"out"}, []wire.Tensor{Strs([]int64{2, 2}, "w/-/1", "x/-/2", "y/-/3", "z/-/")}},
		{"StringJoin of none", []*tfpb.NodeDef{
			ConstStr("a", []int64{0}), ConstStr("b", nil, "x"),
			NodeDef("out", "StringJoin", In("a", "b"), Attrs("N", int64(2))),
		}, []string{"out"}, []wire.Tensor{Strs([]int64{0})}},
		{"StringJoin of one", []*tfpb.NodeDef{
			ConstStr("a", []int64{2}, "p", "q"),
			NodeDef("out", "StringJoin", In("a"), Attrs("N", int64(1), "separator", ",")),
		}, []string{"out"}, []wire.Tensor{Strs([]int64{2}, "p", "q")}},
	})
	runErrCases(t, []errCase{
		{"ShardedFilename of a vector", []*tfpb.NodeDef{
			ConstStr("base", []int64{2}, "a", "b"), ConstI32("shard", nil, 0), ConstI32("num", nil, 1),
			NodeDef("out", "ShardedFilename", In("base", "shard", "num"), nil),
		}, wire.InvalidArgument, "basename must be a string scalar"},
		{"ShardedFilename of int64", []*tfpb.NodeDef{
			ConstStr("base", nil, "a"), ConstI64("shard", nil, 0), ConstI32("num", nil, 1),
			NodeDef("out", "ShardedFilename", In("base", "shard", "num"), nil),
		}, wire.InvalidArgument, "shard must be an int32 scalar"},
		{"StringJoin of two shapes", []*tfpb.NodeDef{
			ConstStr("a", []int64{2}, "a", "b"), ConstStr("b", []int64{3}, "a", "b", "c"),
			NodeDef("out", "StringJoin", In("a", "b"), Attrs("N", int64(2))),
		}, wire.InvalidArgument, "one shape or be scalars"},
		{"StringJoin of floats", []*tfpb.NodeDef{
			ConstStr("a", nil, "a"), ConstF32("b", nil, 1),
			NodeDef("out", "StringJoin", In("a", "b"), Attrs("N", int64(2))),
		}, wire.InvalidArgument, "input 1 is float"},
	})
}
