package tfpb

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func protoName(s string) protoreflect.Name { return protoreflect.Name(s) }

// dataTypes is TensorFlow's DataType numbering; a tensor's dtype travels as
// this number, so one wrong entry mislabels every tensor of that type.
var dataTypes = []struct {
	name string
	num  int32
}{
	{"DT_INVALID", 0},
	{"DT_FLOAT", 1}, {"DT_DOUBLE", 2}, {"DT_INT32", 3}, {"DT_UINT8", 4},
	{"DT_INT16", 5}, {"DT_INT8", 6}, {"DT_STRING", 7}, {"DT_COMPLEX64", 8},
	{"DT_INT64", 9}, {"DT_BOOL", 10}, {"DT_QINT8", 11}, {"DT_QUINT8", 12},
	{"DT_QINT32", 13}, {"DT_BFLOAT16", 14}, {"DT_QINT16", 15}, {"DT_QUINT16", 16},
	{"DT_UINT16", 17}, {"DT_COMPLEX128", 18}, {"DT_HALF", 19}, {"DT_RESOURCE", 20},
	{"DT_VARIANT", 21}, {"DT_UINT32", 22}, {"DT_UINT64", 23},
	{"DT_FLOAT8_E5M2", 24}, {"DT_FLOAT8_E4M3FN", 25}, {"DT_FLOAT8_E4M3FNUZ", 26},
	{"DT_FLOAT8_E4M3B11FNUZ", 27}, {"DT_FLOAT8_E5M2FNUZ", 28}, {"DT_INT4", 29},
	{"DT_UINT4", 30}, {"DT_INT2", 31}, {"DT_UINT2", 32}, {"DT_FLOAT4_E2M1FN", 33},
}

func TestDataTypeNumbers(t *testing.T) {
	for _, tc := range dataTypes {
		if got, ok := DataType_value[tc.name]; !ok || got != tc.num {
			t.Errorf("%s = %d (declared %v), want %d", tc.name, got, ok, tc.num)
		}
		if got := DataType(tc.num).String(); got != tc.name {
			t.Errorf("DataType(%d) = %s, want %s", tc.num, got, tc.name)
		}
		if tc.num == 0 {
			continue
		}
		ref := tc.name + "_REF"
		if got, ok := DataType_value[ref]; !ok || got != tc.num+100 {
			t.Errorf("%s = %d (declared %v), want %d", ref, got, ok, tc.num+100)
		}
	}
	// Nothing declared beyond the table: every value is a base type or its ref.
	if want := 2*len(dataTypes) - 1; len(DataType_value) != want {
		t.Errorf("DataType has %d values, want %d", len(DataType_value), want)
	}
	for name, num := range DataType_value {
		if base, isRef := strings.CutSuffix(name, "_REF"); isRef && DataType_value[base] != num-100 {
			t.Errorf("%s = %d but %s = %d", name, num, base, DataType_value[base])
		}
	}
	// Spot checks against the generated constants, not only the maps.
	for _, c := range []struct {
		got  DataType
		want int32
	}{
		{DataType_DT_FLOAT, 1}, {DataType_DT_BFLOAT16, 14}, {DataType_DT_HALF, 19},
		{DataType_DT_RESOURCE, 20}, {DataType_DT_VARIANT, 21}, {DataType_DT_FLOAT_REF, 101},
		{DataType_DT_UINT64_REF, 123},
	} {
		if int32(c.got) != c.want {
			t.Errorf("%s = %d, want %d", c.got, int32(c.got), c.want)
		}
	}
}

// TestErrorCodes checks tensorflow.error.Code against TensorFlow's numbers,
// which are by design gRPC's status codes.
func TestErrorCodes(t *testing.T) {
	tests := []struct {
		code Code
		name string
		num  int32
		grpc codes.Code
	}{
		{Code_OK, "OK", 0, codes.OK},
		{Code_CANCELLED, "CANCELLED", 1, codes.Canceled},
		{Code_UNKNOWN, "UNKNOWN", 2, codes.Unknown},
		{Code_INVALID_ARGUMENT, "INVALID_ARGUMENT", 3, codes.InvalidArgument},
		{Code_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED", 4, codes.DeadlineExceeded},
		{Code_NOT_FOUND, "NOT_FOUND", 5, codes.NotFound},
		{Code_ALREADY_EXISTS, "ALREADY_EXISTS", 6, codes.AlreadyExists},
		{Code_PERMISSION_DENIED, "PERMISSION_DENIED", 7, codes.PermissionDenied},
		{Code_RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED", 8, codes.ResourceExhausted},
		{Code_FAILED_PRECONDITION, "FAILED_PRECONDITION", 9, codes.FailedPrecondition},
		{Code_ABORTED, "ABORTED", 10, codes.Aborted},
		{Code_OUT_OF_RANGE, "OUT_OF_RANGE", 11, codes.OutOfRange},
		{Code_UNIMPLEMENTED, "UNIMPLEMENTED", 12, codes.Unimplemented},
		{Code_INTERNAL, "INTERNAL", 13, codes.Internal},
		{Code_UNAVAILABLE, "UNAVAILABLE", 14, codes.Unavailable},
		{Code_DATA_LOSS, "DATA_LOSS", 15, codes.DataLoss},
		{Code_UNAUTHENTICATED, "UNAUTHENTICATED", 16, codes.Unauthenticated},
	}
	for _, tc := range tests {
		if int32(tc.code) != tc.num || Code_value[tc.name] != tc.num || tc.code.String() != tc.name {
			t.Errorf("%s: constant %d, by name %d, String %q; want %d", tc.name, int32(tc.code), Code_value[tc.name], tc.code.String(), tc.num)
		}
		if uint32(tc.num) != uint32(tc.grpc) {
			t.Errorf("%s = %d but gRPC %s = %d", tc.name, tc.num, tc.grpc, uint32(tc.grpc))
		}
	}
	if got := Code_value["DO_NOT_USE_RESERVED_FOR_FUTURE_EXPANSION_USE_DEFAULT_IN_SWITCH_INSTEAD_"]; got != 20 {
		t.Errorf("reserved sentinel = %d, want 20", got)
	}
	if got := string(Code_OK.Descriptor().FullName()); got != "tensorflow.error.Code" {
		t.Errorf("enum full name %q, want tensorflow.error.Code", got)
	}
}

// TestFullNames checks the proto full names, which google.protobuf.Any type
// URLs and gRPC reflection expose to TensorFlow peers.
func TestFullNames(t *testing.T) {
	tests := []struct {
		got  protoreflect.FullName
		want protoreflect.FullName
	}{
		{(&RecvTensorRequest{}).ProtoReflect().Descriptor().FullName(), "tensorflow.RecvTensorRequest"},
		{(&TensorProto{}).ProtoReflect().Descriptor().FullName(), "tensorflow.TensorProto"},
		{(&TensorShapeProto_Dim{}).ProtoReflect().Descriptor().FullName(), "tensorflow.TensorShapeProto.Dim"},
		{(&NamedTensorProto{}).ProtoReflect().Descriptor().FullName(), "tensorflow.NamedTensorProto"},
		{(&ServerDef{}).ProtoReflect().Descriptor().FullName(), "tensorflow.ServerDef"},
		{DataType_DT_FLOAT.Descriptor().FullName(), "tensorflow.DataType"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("full name %s, want %s", tc.got, tc.want)
		}
	}
}
