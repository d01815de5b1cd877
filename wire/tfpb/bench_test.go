package tfpb

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// benchResponse is a RecvTensor reply carrying 64 KiB of float32 content, the
// shape of a typical gradient shard.
func benchResponse() *RecvTensorResponse {
	return &RecvTensorResponse{
		Tensor: &TensorProto{
			Dtype:         DataType_DT_FLOAT,
			TensorShape:   &TensorShapeProto{Dim: []*TensorShapeProto_Dim{{Size: 16384}}},
			TensorContent: make([]byte, 64<<10),
		},
		SendStartMicros: 1,
	}
}

// BenchmarkMarshalRecvTensorResponse is the protobuf baseline cost of one
// RecvTensor reply: the copy of tensor_content that starwire's framing avoids.
func BenchmarkMarshalRecvTensorResponse(b *testing.B) {
	m := benchResponse()
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Tensor.TensorContent)))
	for b.Loop() {
		if _, err := proto.Marshal(m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalRecvTensorResponse is the decoding side of the baseline.
func BenchmarkUnmarshalRecvTensorResponse(b *testing.B) {
	m := benchResponse()
	data, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Tensor.TensorContent)))
	for b.Loop() {
		var out RecvTensorResponse
		if err := proto.Unmarshal(data, &out); err != nil {
			b.Fatal(err)
		}
	}
}
