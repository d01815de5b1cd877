package tensor

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func shapeProto(dims ...int64) *tfpb.TensorShapeProto { return ShapeToProto(dims) }

func TestFromProto(t *testing.T) {
	tests := []struct {
		name  string
		p     *tfpb.TensorProto
		shape []int64
		want  any // []float32, []int32, []int64, []float64, []uint8, []string
	}{
		{"float content", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: shapeProto(2), TensorContent: Bytes([]float32{1.5, -2})}, []int64{2}, []float32{1.5, -2}},
		{"float_val", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: shapeProto(3), FloatVal: []float32{1, 2, 3}}, []int64{3}, []float32{1, 2, 3}},
		{"float_val scalar broadcast", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: shapeProto(2, 2), FloatVal: []float32{7}}, []int64{2, 2}, []float32{7, 7, 7, 7}},
		{"float_val last value repeats", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: shapeProto(4), FloatVal: []float32{1, 2}}, []int64{4}, []float32{1, 2, 2, 2}},
		{"no values means zeros", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: shapeProto(3)}, []int64{3}, []float32{0, 0, 0}},
		{"scalar", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, FloatVal: []float32{0.25}}, nil, []float32{0.25}},
		{"int_val", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_INT32, TensorShape: shapeProto(2), IntVal: []int32{-1, 5}}, []int64{2}, []int32{-1, 5}},
		{"int64_val broadcast", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_INT64, TensorShape: shapeProto(3), Int64Val: []int64{1 << 40}}, []int64{3}, []int64{1 << 40, 1 << 40, 1 << 40}},
		{"int64 content", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_INT64, TensorShape: shapeProto(1), TensorContent: Bytes([]int64{-9})}, []int64{1}, []int64{-9}},
		{"double_val", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_DOUBLE, TensorShape: shapeProto(2), DoubleVal: []float64{math.Pi, 1}}, []int64{2}, []float64{math.Pi, 1}},
		{"bool_val", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_BOOL, TensorShape: shapeProto(3), BoolVal: []bool{true, false}}, []int64{3}, []uint8{1, 0, 0}},
		{"uint8 in int_val", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_UINT8, TensorShape: shapeProto(2), IntVal: []int32{255, 3}}, []int64{2}, []uint8{255, 3}},
		{"string_val", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(2), StringVal: [][]byte{[]byte("ab"), []byte("")}}, []int64{2}, []string{"ab", ""}},
		{"string broadcast", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(3), StringVal: [][]byte{[]byte("x")}}, []int64{3}, []string{"x", "x", "x"}},
		{"empty", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: shapeProto(0, 4)}, []int64{0, 4}, []float32{}},
		{"string content", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(3), TensorContent: []byte("\x02\x00\x03abxyz")}, []int64{3}, []string{"ab", "", "xyz"}},
		{"string content scalar", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorContent: []byte("\nckpt/model")}, nil, []string{"ckpt/model"}},
		{"string content long element", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(2), TensorContent: AppendStringList(nil, [][]byte{[]byte(strings.Repeat("z", 300)), []byte("q")})}, []int64{2}, []string{strings.Repeat("z", 300), "q"}},
		{"string content overlong varint", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(2), TensorContent: []byte("\x81\x00\x80\x00a")}, []int64{2}, []string{"a", ""}},
		{"no strings", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(2)}, []int64{2}, []string{"", ""}},
		{"empty strings", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(0)}, []int64{0}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromProto(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			defer got.Buf.Release()
			if !slices.Equal(got.Shape, tt.shape) || got.DType != wire.DataType(tt.p.Dtype) {
				t.Fatalf("got %v%v, want %v%v", got.DType, got.Shape, wire.DataType(tt.p.Dtype), tt.shape)
			}
			if !Aligned(&got) {
				t.Fatal("data not aligned")
			}
			var eq bool
			switch want := tt.want.(type) {
			case []float32:
				eq = slices.Equal(View[float32](got.Data), want)
			case []float64:
				eq = slices.Equal(View[float64](got.Data), want)
			case []int32:
				eq = slices.Equal(View[int32](got.Data), want)
			case []int64:
				eq = slices.Equal(View[int64](got.Data), want)
			case []uint8:
				eq = slices.Equal(got.Data, want)
			case []string:
				elems, err := got.Strings(nil)
				eq = err == nil && len(elems) == len(want)
				for i := range elems {
					eq = eq && string(elems[i]) == want[i]
				}
			}
			if !eq {
				t.Fatalf("got %v, want %v", got.Data, tt.want)
			}
			// Round trip through TensorToProto keeps the values.
			again := roundTrip(t, &got)
			if string(again.Data) != string(got.Data) || !slices.Equal(again.Shape, got.Shape) {
				t.Fatalf("round trip changed %v to %v", got.Data, again.Data)
			}
		})
	}
}

// roundTrip encodes x with TensorToProto and decodes the result; what it
// returns is released when the test ends.
func roundTrip(tb testing.TB, x *wire.Tensor) wire.Tensor {
	tb.Helper()
	p, err := ToProto(x)
	if err != nil {
		tb.Fatal(err)
	}
	again, err := FromProto(p)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(again.Buf.Release)
	return again
}

func TestTensorFromProtoRejects(t *testing.T) {
	tests := map[string]*tfpb.TensorProto{
		"too many values":               {Dtype: tfpb.DataType_DT_FLOAT, TensorShape: shapeProto(1), FloatVal: []float32{1, 2}},
		"short content":                 {Dtype: tfpb.DataType_DT_FLOAT, TensorShape: shapeProto(2), TensorContent: []byte{1, 2, 3, 4}},
		"unknown rank":                  {Dtype: tfpb.DataType_DT_FLOAT, TensorShape: &tfpb.TensorShapeProto{UnknownRank: true}},
		"unknown dim":                   {Dtype: tfpb.DataType_DT_FLOAT, TensorShape: shapeProto(-1)},
		"resource dtype":                {Dtype: tfpb.DataType_DT_RESOURCE},
		"invalid dtype":                 {Dtype: tfpb.DataType_DT_INVALID},
		"too many strings":              {Dtype: tfpb.DataType_DT_STRING, StringVal: [][]byte{{1}, {2}}},
		"overflowing":                   {Dtype: tfpb.DataType_DT_FLOAT, TensorShape: shapeProto(1<<40, 1<<40)},
		"huge":                          {Dtype: tfpb.DataType_DT_FLOAT, TensorShape: shapeProto(1 << 40)},
		"huge string broadcast":         {Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(1 << 40), StringVal: [][]byte{[]byte("x")}},
		"huge empty strings":            {Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(1 << 40)},
		"string length beyond content":  {Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(2), TensorContent: []byte("\x05\x01a")},
		"fewer strings than elements":   {Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(3), TensorContent: []byte("\x01\x01ab")},
		"more strings than elements":    {Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(1), TensorContent: []byte("\x01\x01ab")},
		"bytes after the strings":       {Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(1), TensorContent: []byte("\x01abc")},
		"string count beyond content":   {Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(1 << 40), TensorContent: []byte("\x00\x00")},
		"string length not a varint32":  {Dtype: tfpb.DataType_DT_STRING, TensorContent: []byte("\xff\xff\xff\xff\x7f")},
		"string length varint too long": {Dtype: tfpb.DataType_DT_STRING, TensorContent: []byte("\x80\x80\x80\x80\x80\x00")},
		"string length truncated":       {Dtype: tfpb.DataType_DT_STRING, TensorContent: []byte("\x80")},
		"content for no strings":        {Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(0), TensorContent: []byte("\x00")},
	}
	for name, p := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := FromProto(p)
			if !errors.Is(err, status.ErrInvalidArgument) {
				got.Buf.Release()
				t.Fatalf("TensorFromProto = %v%v, %v; want InvalidArgument", got.DType, got.Shape, err)
			}
		})
	}
}

// FuzzTensorFromProto decodes arbitrary TensorProtos, seeded with real
// encodings from testdata; whatever decodes must pass Check and survive a
// round trip.
func FuzzFromProto(f *testing.F) {
	addSeeds(f, "testdata/tensorproto-*.bin")
	f.Fuzz(func(t *testing.T, b []byte) {
		p := new(tfpb.TensorProto)
		if proto.Unmarshal(b, p) != nil {
			return
		}
		if n, ok := NumElements(knownDims(p.GetTensorShape())); ok && n > 1<<20 {
			return // a legal but memory-hungry shape
		}
		tensor, err := FromProto(p)
		if err != nil {
			return
		}
		defer tensor.Buf.Release()
		if err := tensor.Check(); err != nil {
			t.Fatalf("decoded tensor fails Check: %v", err)
		}
		again := roundTrip(t, &tensor)
		if string(again.Data) != string(tensor.Data) {
			t.Fatal("round trip changed the data")
		}
		if tensor.DType == wire.DTString {
			// TensorFlow's own encoding of the strings decodes to the same.
			elems, err := tensor.Strings(nil)
			if err != nil {
				t.Fatalf("decoded strings: %v", err)
			}
			list := &tfpb.TensorProto{Dtype: p.Dtype, TensorShape: ShapeToProto(tensor.Shape), TensorContent: AppendStringList(nil, elems)}
			if len(elems) == 0 {
				list.TensorContent = nil
			}
			fromList, err := FromProto(list)
			if err != nil {
				t.Fatalf("TensorFlow's encoding of %d strings: %v", len(elems), err)
			}
			defer fromList.Buf.Release()
			if string(fromList.Data) != string(tensor.Data) {
				t.Fatal("TensorFlow's encoding of the strings decodes to other strings")
			}
		}
	})
}

// addSeeds adds the contents of the testdata files pattern matches to f's
// corpus. TestFuzzSeedsDecode checks that the patterns match.
func addSeeds(f *testing.F, pattern string) {
	seeds, _ := filepath.Glob(pattern)
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// TestFuzzSeedsDecode checks that testdata's seeds are TensorProtos.
func TestFuzzSeedsDecode(t *testing.T) {
	files, _ := filepath.Glob("testdata/tensorproto-*.bin")
	if len(files) == 0 {
		t.Fatal("no seeds match testdata/tensorproto-*.bin")
	}
	for _, file := range files {
		b, _ := os.ReadFile(file)
		if err := proto.Unmarshal(b, new(tfpb.TensorProto)); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
}

// knownDims is the shape p describes, with unknown dimensions as -1.
func knownDims(p *tfpb.TensorShapeProto) []int64 {
	dims := make([]int64, len(p.GetDim()))
	for i, d := range p.GetDim() {
		dims[i] = max(d.GetSize(), -1)
	}
	return dims
}

// BenchmarkFromProtoStrings decodes 1024 strings of 16 bytes from each of
// TensorFlow's encodings.
func BenchmarkFromProtoStrings(b *testing.B) {
	elems := make([][]byte, 1024)
	for i := range elems {
		elems[i] = []byte(strings.Repeat(string(rune('a'+i%26)), 16))
	}
	for _, bc := range []struct {
		name string
		p    *tfpb.TensorProto
	}{
		{"tensor_content", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(1024), TensorContent: AppendStringList(nil, elems)}},
		{"string_val", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: shapeProto(1024), StringVal: elems}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(1024 * 17)
			for b.Loop() {
				t, err := FromProto(bc.p)
				if err != nil {
					b.Fatal(err)
				}
				t.Buf.Release()
			}
		})
	}
}
