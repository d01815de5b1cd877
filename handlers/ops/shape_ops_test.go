package ops_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Values below follow TensorFlow's documented semantics (and NumPy's, for
// slicing), worked out by hand on small row-major tensors.

func TestConcatPackUnpack(t *testing.T) {
	f, i32 := wire.DTFloat, wire.DTInt32
	a := func() *tfpb.NodeDef { return ConstF32("a", []int64{2, 2}, 1, 2, 3, 4) }
	b := func() *tfpb.NodeDef { return ConstF32("b", []int64{2, 1}, 5, 6) }
	runCases(t, []opCase{
		{"ConcatV2 axis 1", []*tfpb.NodeDef{a(), b(), ConstI32("ax", nil, 1), NodeDef("out", "ConcatV2", In("a", "b", "ax"), Attrs("T", f, "N", 2))},
			[]string{"out"}, []wire.Tensor{F32([]int64{2, 3}, 1, 2, 5, 3, 4, 6)}},
		{"ConcatV2 axis -2", []*tfpb.NodeDef{a(), ConstF32("c", []int64{1, 2}, 7, 8), ConstI64("ax", nil, -2), NodeDef("out", "ConcatV2", In("a", "c", "ax"), Attrs("T", f, "N", 2, "Tidx", wire.DTInt64))},
			[]string{"out"}, []wire.Tensor{F32([]int64{3, 2}, 1, 2, 3, 4, 7, 8)}},
		{"ConcatV2 of int64 with an empty part", []*tfpb.NodeDef{ConstI64("x", []int64{2}, 1, 2), ConstI64("e", []int64{0}), ConstI64("y", []int64{1}, 3), ConstI32("ax", nil, 0),
			NodeDef("out", "ConcatV2", In("x", "e", "y", "ax"), Attrs("T", wire.DTInt64, "N", 3))},
			[]string{"out"}, []wire.Tensor{I64([]int64{3}, 1, 2, 3)}},
		{"Pack axis 0", []*tfpb.NodeDef{ConstF32("x", []int64{2}, 1, 2), ConstF32("y", []int64{2}, 3, 4), NodeDef("out", "Pack", In("x", "y"), Attrs("T", f, "N", 2))},
			[]string{"out"}, []wire.Tensor{F32([]int64{2, 2}, 1, 2, 3, 4)}},
		{"Pack axis 1", []*tfpb.NodeDef{ConstF32("x", []int64{2}, 1, 2), ConstF32("y", []int64{2}, 3, 4), NodeDef("out", "Pack", In("x", "y"), Attrs("T", f, "N", 2, "axis", 1))},
			[]string{"out"}, []wire.Tensor{F32([]int64{2, 2}, 1, 3, 2, 4)}},
		{"Pack scalars", []*tfpb.NodeDef{ConstI32("x", nil, 7), ConstI32("y", nil, 9), NodeDef("out", "Pack", In("x", "y"), Attrs("T", i32, "N", 2, "axis", -1))},
			[]string{"out"}, []wire.Tensor{I32([]int64{2}, 7, 9)}},
		{"Unpack axis 0", []*tfpb.NodeDef{ConstF32("x", []int64{2, 3}, 1, 2, 3, 4, 5, 6), NodeDef("out", "Unpack", In("x"), Attrs("T", f, "num", 2))},
			[]string{"out:0", "out:1"}, []wire.Tensor{F32([]int64{3}, 1, 2, 3), F32([]int64{3}, 4, 5, 6)}},
		{"Unpack axis -1", []*tfpb.NodeDef{ConstF32("x", []int64{2, 3}, 1, 2, 3, 4, 5, 6), NodeDef("out", "Unpack", In("x"), Attrs("T", f, "num", 3, "axis", -1))},
			[]string{"out:0", "out:2"}, []wire.Tensor{F32([]int64{2}, 1, 4), F32([]int64{2}, 3, 6)}},
	})
	runErrCases(t, []errCase{
		{"ConcatV2 shapes differ", []*tfpb.NodeDef{a(), ConstF32("c", []int64{3, 1}), ConstI32("ax", nil, 1), NodeDef("out", "ConcatV2", In("a", "c", "ax"), Attrs("T", f, "N", 2))},
			wire.InvalidArgument, "they differ outside axis 1"},
		{"ConcatV2 dtypes differ", []*tfpb.NodeDef{a(), ConstI32("c", []int64{2, 1}), ConstI32("ax", nil, 1), NodeDef("out", "ConcatV2", In("a", "c", "ax"), Attrs("T", f, "N", 2))},
			wire.InvalidArgument, "input 1 is int32, want float"},
		{"ConcatV2 axis out of range", []*tfpb.NodeDef{a(), b(), ConstI32("ax", nil, 2), NodeDef("out", "ConcatV2", In("a", "b", "ax"), Attrs("T", f, "N", 2))},
			wire.InvalidArgument, "axis 2 is out of range for rank 2"},
		{"ConcatV2 of strings", []*tfpb.NodeDef{ConstStr("s", []int64{1}, "x"), ConstI32("ax", nil, 0), NodeDef("out", "ConcatV2", In("s", "ax"), Attrs("T", wire.DTString, "N", 1))},
			wire.InvalidArgument, "only fixed-size types"},
		{"Pack shapes differ", []*tfpb.NodeDef{ConstF32("x", []int64{2}), ConstF32("y", []int64{3}), NodeDef("out", "Pack", In("x", "y"), Attrs("T", f, "N", 2))},
			wire.InvalidArgument, "input 1 has shape [3], input 0 has [2]"},
		{"Unpack num", []*tfpb.NodeDef{ConstF32("x", []int64{2, 3}), NodeDef("out", "Unpack", In("x"), Attrs("T", f, "num", 3))},
			wire.InvalidArgument, "input has 2 along axis 0, num is 3"},
	})
}

func TestSliceAndStridedSlice(t *testing.T) {
	f := wire.DTFloat
	// x = [[0 1 2 3] [4 5 6 7] [8 9 10 11]]
	x := func() *tfpb.NodeDef {
		return ConstF32("x", []int64{3, 4}, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
	}
	ss := func(begin, end, strides []int32, masks ...any) []*tfpb.NodeDef {
		n := int64(len(begin))
		return []*tfpb.NodeDef{x(), ConstI32("b", []int64{n}, begin...), ConstI32("e", []int64{n}, end...), ConstI32("s", []int64{n}, strides...),
			NodeDef("out", "StridedSlice", In("x", "b", "e", "s"), Attrs(append([]any{"T", f, "Index", wire.DTInt32}, masks...)...))}
	}
	runCases(t, []opCase{
		{"Slice", []*tfpb.NodeDef{x(), ConstI32("b", []int64{2}, 1, 1), ConstI32("s", []int64{2}, 2, 2), NodeDef("out", "Slice", In("x", "b", "s"), Attrs("T", f, "Index", wire.DTInt32))},
			[]string{"out"}, []wire.Tensor{F32([]int64{2, 2}, 5, 6, 9, 10)}},
		{"Slice size -1", []*tfpb.NodeDef{x(), ConstI64("b", []int64{2}, 0, 2), ConstI64("s", []int64{2}, -1, 1), NodeDef("out", "Slice", In("x", "b", "s"), Attrs("T", f, "Index", wire.DTInt64))},
			[]string{"out"}, []wire.Tensor{F32([]int64{3, 1}, 2, 6, 10)}},
		// x[1:3, 0:4:2]
		{"StridedSlice", ss([]int32{1, 0}, []int32{3, 4}, []int32{1, 2}), []string{"out"}, []wire.Tensor{F32([]int64{2, 2}, 4, 6, 8, 10)}},
		// x[::-1, -1] (begin and end masked in dim 0, dim 1 shrunk)
		{"StridedSlice reversed, shrink", ss([]int32{0, -1}, []int32{0, 0}, []int32{-1, 1}, "begin_mask", 1, "end_mask", 1, "shrink_axis_mask", 2),
			[]string{"out"}, []wire.Tensor{F32([]int64{3}, 11, 7, 3)}},
		// x[1] (one spec entry, implicit ellipsis after it)
		{"StridedSlice shrink to a row", ss([]int32{1}, []int32{2}, []int32{1}, "shrink_axis_mask", 1), []string{"out"}, []wire.Tensor{F32([]int64{4}, 4, 5, 6, 7)}},
		// x[..., 1:3]
		{"StridedSlice ellipsis", ss([]int32{0, 1}, []int32{0, 3}, []int32{1, 1}, "ellipsis_mask", 1), []string{"out"}, []wire.Tensor{F32([]int64{3, 2}, 1, 2, 5, 6, 9, 10)}},
		// x[tf.newaxis, 2, -2:]
		{"StridedSlice new axis", ss([]int32{0, 2, -2}, []int32{0, 3, 0}, []int32{1, 1, 1}, "new_axis_mask", 1, "shrink_axis_mask", 2, "end_mask", 4),
			[]string{"out"}, []wire.Tensor{F32([]int64{1, 2}, 10, 11)}},
		// x[5:10] clamps to an empty slice; x[-100:2] clamps to 0:2
		{"StridedSlice clamps", ss([]int32{5}, []int32{10}, []int32{1}), []string{"out"}, []wire.Tensor{F32([]int64{0, 4})}},
		{"StridedSlice clamps below", ss([]int32{-100, 3}, []int32{2, 4}, []int32{1, 1}), []string{"out"}, []wire.Tensor{F32([]int64{2, 1}, 3, 7)}},
		// x[2:0:-1, 3:0:-2]
		{"StridedSlice negative strides", ss([]int32{2, 3}, []int32{0, 0}, []int32{-1, -2}), []string{"out"}, []wire.Tensor{F32([]int64{2, 2}, 11, 9, 7, 5)}},
	})
	runErrCases(t, []errCase{
		{"Slice outside", []*tfpb.NodeDef{x(), ConstI32("b", []int64{2}, 2, 0), ConstI32("s", []int64{2}, 2, 1), NodeDef("out", "Slice", In("x", "b", "s"), Attrs("T", f, "Index", wire.DTInt32))},
			wire.InvalidArgument, "outside shape [3 4] in dimension 0"},
		{"Slice begin length", []*tfpb.NodeDef{x(), ConstI32("b", []int64{1}, 0), ConstI32("s", []int64{2}, 1, 1), NodeDef("out", "Slice", In("x", "b", "s"), Attrs("T", f, "Index", wire.DTInt32))},
			wire.InvalidArgument, "begin must be an int vector of length 2"},
		{"StridedSlice zero stride", ss([]int32{0}, []int32{1}, []int32{0}), wire.InvalidArgument, "strides[0] is 0"},
		{"StridedSlice shrink out of bounds", ss([]int32{3}, []int32{4}, []int32{1}, "shrink_axis_mask", 1), wire.InvalidArgument, "out of bounds for size 3"},
		{"StridedSlice too many indices", ss([]int32{0, 0, 0}, []int32{1, 1, 1}, []int32{1, 1, 1}), wire.InvalidArgument, "beyond the input's rank 2"},
	})
}

func TestPartitionStitchUniqueSegments(t *testing.T) {
	f, i32, i64 := wire.DTFloat, wire.DTInt32, wire.DTInt64
	runCases(t, []opCase{
		// TensorFlow's doc example: partitions [0 0 1 1 0], data [10 20 30 40 50].
		{"DynamicPartition", []*tfpb.NodeDef{ConstF32("d", []int64{5}, 10, 20, 30, 40, 50), ConstI32("p", []int64{5}, 0, 0, 1, 1, 0),
			NodeDef("out", "DynamicPartition", In("d", "p"), Attrs("T", f, "num_partitions", 2))},
			[]string{"out:0", "out:1"}, []wire.Tensor{F32([]int64{3}, 10, 20, 50), F32([]int64{2}, 30, 40)}},
		{"DynamicPartition rows, an empty partition", []*tfpb.NodeDef{ConstI64("d", []int64{3, 2}, 1, 2, 3, 4, 5, 6), ConstI32("p", []int64{3}, 2, 0, 2),
			NodeDef("out", "DynamicPartition", In("d", "p"), Attrs("T", i64, "num_partitions", 3))},
			[]string{"out:0", "out:1", "out:2"}, []wire.Tensor{I64([]int64{1, 2}, 3, 4), I64([]int64{0, 2}), I64([]int64{2, 2}, 1, 2, 5, 6)}},
		// TensorFlow's doc example: indices [6], [4 1], [[5 2] [0 3]].
		{"DynamicStitch", []*tfpb.NodeDef{ConstI32("i0", nil, 6), ConstI32("i1", []int64{2}, 4, 1), ConstI32("i2", []int64{2, 2}, 5, 2, 0, 3),
			ConstF32("d0", []int64{2}, 61, 62), ConstF32("d1", []int64{2, 2}, 41, 42, 11, 12), ConstF32("d2", []int64{2, 2, 2}, 51, 52, 21, 22, 1, 2, 31, 32),
			NodeDef("out", "DynamicStitch", In("i0", "i1", "i2", "d0", "d1", "d2"), Attrs("T", f, "N", 3))},
			[]string{"out"}, []wire.Tensor{F32([]int64{7, 2}, 1, 2, 11, 12, 21, 22, 31, 32, 41, 42, 51, 52, 61, 62)}},
		// A later index wins; row 1, which no index names, is zero.
		{"ParallelDynamicStitch overlap", []*tfpb.NodeDef{ConstI32("i0", []int64{2}, 0, 2), ConstI32("i1", []int64{1}, 2), ConstF32("d0", []int64{2}, 1, 2), ConstF32("d1", []int64{1}, 3),
			NodeDef("out", "ParallelDynamicStitch", In("i0", "i1", "d0", "d1"), Attrs("T", f, "N", 2))},
			[]string{"out"}, []wire.Tensor{F32([]int64{3}, 1, 0, 3)}},
		// TensorFlow's doc example: x [1 1 2 4 4 4 7 8 8].
		{"Unique", []*tfpb.NodeDef{ConstI64("x", []int64{9}, 1, 1, 2, 4, 4, 4, 7, 8, 8), NodeDef("out", "Unique", In("x"), Attrs("T", i64))},
			[]string{"out:0", "out:1"}, []wire.Tensor{I64([]int64{5}, 1, 2, 4, 7, 8), I32([]int64{9}, 0, 0, 1, 2, 2, 2, 3, 4, 4)}},
		{"Unique int64 idx", []*tfpb.NodeDef{ConstI32("x", []int64{4}, 9, 3, 9, 3), NodeDef("out", "Unique", In("x"), Attrs("T", i32, "out_idx", i64))},
			[]string{"out:0", "out:1"}, []wire.Tensor{I32([]int64{2}, 9, 3), I64([]int64{4}, 0, 1, 0, 1)}},
		// TensorFlow's doc example, with a dropped negative id.
		{"UnsortedSegmentSum", []*tfpb.NodeDef{ConstI32("d", []int64{3, 4}, 1, 2, 3, 4, 5, 6, 7, 8, 4, 3, 2, 1), ConstI32("ids", []int64{3}, 0, 1, 0), ConstI32("n", nil, 2),
			NodeDef("out", "UnsortedSegmentSum", In("d", "ids", "n"), Attrs("T", i32, "Tindices", i32))},
			[]string{"out"}, []wire.Tensor{I32([]int64{2, 4}, 5, 5, 5, 5, 5, 6, 7, 8)}},
		{"UnsortedSegmentSum floats, negative id, empty segment", []*tfpb.NodeDef{ConstF32("d", []int64{3}, 1.5, 2, 4), ConstI64("ids", []int64{3}, 2, -1, 2), ConstI64("n", nil, 3),
			NodeDef("out", "UnsortedSegmentSum", In("d", "ids", "n"), Attrs("T", f, "Tindices", i64, "Tnumsegments", i64))},
			[]string{"out"}, []wire.Tensor{F32([]int64{3}, 0, 0, 5.5)}},
	})
	runErrCases(t, []errCase{
		{"DynamicPartition out of range", []*tfpb.NodeDef{ConstF32("d", []int64{2}), ConstI32("p", []int64{2}, 0, 2), NodeDef("out", "DynamicPartition", In("d", "p"), Attrs("T", f, "num_partitions", 2))},
			wire.InvalidArgument, "partitions[1] = 2 is not in [0, 2)"},
		{"DynamicPartition shapes", []*tfpb.NodeDef{ConstF32("d", []int64{2}), ConstI32("p", []int64{3}), NodeDef("out", "DynamicPartition", In("d", "p"), Attrs("T", f, "num_partitions", 2))},
			wire.InvalidArgument, "partitions shape [3] is not a prefix of data shape [2]"},
		{"DynamicPartition int64 partitions", []*tfpb.NodeDef{ConstF32("d", []int64{2}), ConstI64("p", []int64{2}), NodeDef("out", "DynamicPartition", In("d", "p"), Attrs("T", f, "num_partitions", 2))},
			wire.InvalidArgument, "input 1 is int64, want int32"},
		{"DynamicStitch negative", []*tfpb.NodeDef{ConstI32("i", []int64{1}, -1), ConstF32("d", []int64{1}), NodeDef("out", "DynamicStitch", In("i", "d"), Attrs("T", f, "N", 1))},
			wire.InvalidArgument, "is negative"},
		{"DynamicStitch row shapes", []*tfpb.NodeDef{ConstI32("i0", []int64{1}, 0), ConstI32("i1", []int64{1}, 1), ConstF32("d0", []int64{1, 2}), ConstF32("d1", []int64{1, 3}),
			NodeDef("out", "DynamicStitch", In("i0", "i1", "d0", "d1"), Attrs("T", f, "N", 2))},
			wire.InvalidArgument, "rows of shape [2] expected"},
		{"Unique of a matrix", []*tfpb.NodeDef{ConstI64("x", []int64{2, 2}), NodeDef("out", "Unique", In("x"), Attrs("T", i64))}, wire.InvalidArgument, "x must be a vector"},
		{"UnsortedSegmentSum id too large", []*tfpb.NodeDef{ConstF32("d", []int64{2}), ConstI32("ids", []int64{2}, 0, 2), ConstI32("n", nil, 2),
			NodeDef("out", "UnsortedSegmentSum", In("d", "ids", "n"), Attrs("T", f, "Tindices", i32))},
			wire.InvalidArgument, "segment_ids[1] = 2 is not below num_segments 2"},
	})
}
