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

// TestPackSaverStrings packs strings as a sharded Saver packs its shards' file
// names for MergeV2Checkpoints.
func TestPackSaverStrings(t *testing.T) {
	s := wire.DTString
	runCases(t, []opCase{
		{"scalars", []*tfpb.NodeDef{
			ConstStr("a", nil, "m_temp/part-00000-of-00002"), ConstStrList("b", nil, "m_temp/part-00001-of-00002"),
			NodeDef("out", "Pack", In("a", "b"), Attrs("N", 2, "T", s, "axis", 0)),
		}, []string{"out"}, []wire.Tensor{Strs([]int64{2}, "m_temp/part-00000-of-00002", "m_temp/part-00001-of-00002")}},
		{"vectors along axis 1", []*tfpb.NodeDef{
			ConstStr("a", []int64{2}, "a0", "a1"), ConstStr("b", []int64{2}, "b0", "b1"), ConstStr("c", []int64{2}, "c0", "c1"),
			NodeDef("out", "Pack", In("a", "b", "c"), Attrs("N", 3, "T", s, "axis", 1)),
		}, []string{"out"}, []wire.Tensor{Strs([]int64{2, 3}, "a0", "b0", "c0", "a1", "b1", "c1")}},
		{"vectors along axis 0", []*tfpb.NodeDef{
			ConstStr("a", []int64{2}, "a0", "a1"), ConstStr("b", []int64{2}, "b0", "b1"),
			NodeDef("out", "Pack", In("a", "b"), Attrs("N", 2, "T", s, "axis", -2)),
		}, []string{"out"}, []wire.Tensor{Strs([]int64{2, 2}, "a0", "a1", "b0", "b1")}},
	})
}

// TestSaverSuffixOps runs the ops by which a Saver picks its temporary
// suffix, where(regex_full_match(prefix, "^s3://.*"), ".part",
// "_temp/part"), and Select's other forms.
func TestSaverSuffixOps(t *testing.T) {
	s := wire.DTString
	suffix := func(prefix, op string) []*tfpb.NodeDef {
		return []*tfpb.NodeDef{
			ConstStr("filename/input", nil, "model"),
			NodeDef("filename", "PlaceholderWithDefault", In("filename/input"), Attrs("dtype", s, "shape", []int64{})),
			ConstStrList("prefix", nil, prefix),
			NodeDef("is_s3", "StaticRegexFullMatch", In("prefix"), Attrs("pattern", "^s3://.*")),
			ConstStr("part", nil, ".part"), ConstStr("temp", nil, "_temp/part"),
			NodeDef("out", op, In("is_s3", "part", "temp"), Attrs("T", s)),
		}
	}
	runCases(t, []opCase{
		{"SelectV2 local", suffix("/ckpt/model", "SelectV2"), []string{"out", "filename"}, []wire.Tensor{Strs(nil, "_temp/part"), Strs(nil, "model")}},
		{"Select s3", suffix("s3://bucket/model", "Select"), []string{"out", "is_s3"}, []wire.Tensor{Strs(nil, ".part"), Bools(nil, true)}},
		{"RegexFullMatch is whole", []*tfpb.NodeDef{
			ConstStr("in", []int64{3}, "ab", "abc", "xab"), ConstStr("pattern", nil, "a|ab"),
			NodeDef("out", "RegexFullMatch", In("in", "pattern"), nil),
		}, []string{"out"}, []wire.Tensor{Bools([]int64{3}, true, false, false)}},
		{"StaticRegexFullMatch is whole", []*tfpb.NodeDef{
			ConstStrList("in", []int64{2, 2}, "s3://b", "/s3://b", "s3:/", ""),
			NodeDef("out", "StaticRegexFullMatch", In("in"), Attrs("pattern", "s3://.*")),
		}, []string{"out"}, []wire.Tensor{Bools([]int64{2, 2}, true, false, false, false)}},
		{"Select elementwise", []*tfpb.NodeDef{
			NodeDef("cond", "Const", nil, Attrs("dtype", wire.DTBool, "value", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_BOOL, TensorShape: tensor.ShapeToProto([]int64{3}), BoolVal: []bool{true, false, true}})),
			ConstF32("t", []int64{3}, 1, 2, 3), ConstF32("e", []int64{3}, -1, -2, -3),
			ConstStr("ts", []int64{3}, "a", "b", "c"), ConstStr("es", []int64{3}, "x", "y", "z"),
			NodeDef("out", "SelectV2", In("cond", "t", "e"), Attrs("T", wire.DTFloat)),
			NodeDef("outs", "Select", In("cond", "ts", "es"), Attrs("T", s)),
		}, []string{"out", "outs"}, []wire.Tensor{F32([]int64{3}, 1, -2, 3), Strs([]int64{3}, "a", "y", "c")}},
		{"Select rows", []*tfpb.NodeDef{
			NodeDef("cond", "Const", nil, Attrs("dtype", wire.DTBool, "value", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_BOOL, TensorShape: tensor.ShapeToProto([]int64{2}), BoolVal: []bool{false, true}})),
			ConstI64("t", []int64{2, 2}, 1, 2, 3, 4), ConstI64("e", []int64{2, 2}, 5, 6, 7, 8),
			NodeDef("out", "Select", In("cond", "t", "e"), Attrs("T", wire.DTInt64)),
		}, []string{"out"}, []wire.Tensor{I64([]int64{2, 2}, 5, 6, 3, 4)}},
	})
	runErrCases(t, []errCase{
		{"bad pattern", []*tfpb.NodeDef{
			ConstStr("in", nil, "a"), ConstStr("pattern", nil, "(a"),
			NodeDef("out", "RegexFullMatch", In("in", "pattern"), nil),
		}, wire.InvalidArgument, `pattern "(a"`},
		{"bad static pattern", []*tfpb.NodeDef{
			ConstStr("in", nil, "a"),
			NodeDef("out", "StaticRegexFullMatch", In("in"), Attrs("pattern", "[")),
		}, wire.InvalidArgument, `pattern "["`},
		{"Select of two shapes", []*tfpb.NodeDef{
			NodeDef("cond", "Const", nil, Attrs("dtype", wire.DTBool, "value", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_BOOL, BoolVal: []bool{true}})),
			ConstI64("t", []int64{2}, 1, 2), ConstI64("e", []int64{1}, 5),
			NodeDef("out", "Select", In("cond", "t", "e"), Attrs("T", wire.DTInt64)),
		}, wire.InvalidArgument, "must have the same shape"},
	})
}
