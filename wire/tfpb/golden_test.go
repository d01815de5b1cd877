package tfpb

import (
	"bytes"
	"encoding/hex"
	"testing"

	"google.golang.org/protobuf/proto"
)

// goldenCase pairs a message with the exact bytes TensorFlow's encoder
// produces for it. The bytes are written out by hand from the field numbers
// and wire types of TensorFlow's definitions (tag = number<<3 | wire type), so
// a renumbered field or a changed type breaks the test.
type goldenCase struct {
	name string
	msg  proto.Message
	want []byte
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func goldenCases() []goldenCase {
	content := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40} // float32 {1, 2}, little endian
	return []goldenCase{
		{
			name: "RecvTensorRequest step_id=1 rendezvous_key=2",
			msg:  &RecvTensorRequest{StepId: 7, RendezvousKey: "k"},
			want: []byte{0x08, 0x07, 0x12, 0x01, 'k'},
		},
		{
			name: "RecvTensorRequest dma_ok=3 request_id=7",
			msg:  &RecvTensorRequest{DmaOk: true, RequestId: 9},
			want: []byte{0x18, 0x01, 0x38, 0x09},
		},
		{
			name: "RecvTensorRequest client_locality=4 server_locality=5",
			msg: &RecvTensorRequest{
				ClientLocality: &DeviceLocality{BusId: 1},
				ServerLocality: &DeviceLocality{NumaNode: 2},
			},
			want: []byte{0x22, 0x02, 0x08, 0x01, 0x2a, 0x02, 0x10, 0x02},
		},
		{
			name: "RecvTensorResponse tensor=1 is_dead=2 send_start_micros=3 require_ack=5",
			msg: &RecvTensorResponse{
				Tensor:          &TensorProto{Dtype: DataType_DT_FLOAT},
				IsDead:          true,
				SendStartMicros: 300,
				RequireAck:      true,
			},
			want: []byte{0x0a, 0x02, 0x08, 0x01, 0x10, 0x01, 0x18, 0xac, 0x02, 0x28, 0x01},
		},
		{
			name: "MarkRecvFinishedRequest request_id=1",
			msg:  &MarkRecvFinishedRequest{RequestId: 300},
			want: []byte{0x08, 0xac, 0x02},
		},
		{
			name: "TensorProto dtype=1 tensor_shape=2 tensor_content=4",
			msg: &TensorProto{
				Dtype:         DataType_DT_FLOAT,
				TensorShape:   &TensorShapeProto{Dim: []*TensorShapeProto_Dim{{Size: 2}}},
				TensorContent: content,
			},
			want: cat([]byte{0x08, 0x01, 0x12, 0x04, 0x12, 0x02, 0x08, 0x02, 0x22, 0x08}, content),
		},
		{
			name: "TensorProto version_number=3 float_val=5 packed",
			msg:  &TensorProto{VersionNumber: 1, FloatVal: []float32{1}},
			want: []byte{0x18, 0x01, 0x2a, 0x04, 0x00, 0x00, 0x80, 0x3f},
		},
		{
			name: "TensorProto string_val=8 int64_val=10 packed",
			msg:  &TensorProto{StringVal: [][]byte{[]byte("ab")}, Int64Val: []int64{1, 2}},
			want: []byte{0x42, 0x02, 'a', 'b', 0x52, 0x02, 0x01, 0x02},
		},
		{
			name: "TensorProto half_val=13 uint64_val=17 float8_val=18",
			msg:  &TensorProto{HalfVal: []int32{0x3c00}, Uint64Val: []uint64{5}, Float8Val: []byte{0x38}},
			want: []byte{0x6a, 0x02, 0x80, 0x78, 0x8a, 0x01, 0x01, 0x05, 0x92, 0x01, 0x01, 0x38},
		},
		{
			name: "TensorShapeProto dim=2 (size=1 name=2) unknown_rank=3",
			msg: &TensorShapeProto{
				Dim:         []*TensorShapeProto_Dim{{Size: -1, Name: "b"}},
				UnknownRank: true,
			},
			want: []byte{0x12, 0x0e, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
				0x12, 0x01, 'b', 0x18, 0x01},
		},
		{
			name: "NamedTensorProto name=1 tensor=2",
			msg:  &NamedTensorProto{Name: "a", Tensor: &TensorProto{Dtype: DataType_DT_INT32}},
			want: []byte{0x0a, 0x01, 'a', 0x12, 0x02, 0x08, 0x03},
		},
		{
			name: "RunGraphRequest graph_handle=1 step_id=2 send=3 recv_key=4",
			msg: &RunGraphRequest{
				GraphHandle: "g",
				StepId:      1,
				Send:        []*NamedTensorProto{{Name: "x"}},
				RecvKey:     []string{"r"},
			},
			want: []byte{0x0a, 0x01, 'g', 0x10, 0x01, 0x1a, 0x03, 0x0a, 0x01, 'x', 0x22, 0x01, 'r'},
		},
		{
			name: "RunGraphRequest exec_opts=5 is_partial=6 session_handle=8 create_worker_session_called=10 request_id=11",
			msg: &RunGraphRequest{
				ExecOpts:                  &ExecutorOpts{RecordTimeline: true},
				IsPartial:                 true,
				IsLastPartialRun:          true,
				SessionHandle:             "s",
				StoreErrorsInResponseBody: true,
				CreateWorkerSessionCalled: true,
				RequestId:                 2,
			},
			want: []byte{0x2a, 0x02, 0x18, 0x01, 0x30, 0x01, 0x38, 0x01, 0x42, 0x01, 's',
				0x48, 0x01, 0x50, 0x01, 0x58, 0x02},
		},
		{
			name: "RunGraphResponse recv=1 status_code=5 status_error_message=6",
			msg: &RunGraphResponse{
				Recv:               []*NamedTensorProto{{Name: "y"}},
				StatusCode:         Code_NOT_FOUND,
				StatusErrorMessage: "e",
			},
			want: []byte{0x0a, 0x03, 0x0a, 0x01, 'y', 0x28, 0x05, 0x32, 0x01, 'e'},
		},
		{
			name: "RegisterGraphRequest session_handle=1 graph_def=2 create_worker_session_called=6 collective_graph_key=7",
			msg: &RegisterGraphRequest{
				SessionHandle: "s",
				GraphDef: &GraphDef{
					Node:     []*NodeDef{{Name: "n", Op: "NoOp", Device: "d"}},
					Versions: &VersionDef{Producer: 1},
				},
				CreateWorkerSessionCalled: true,
				CollectiveGraphKey:        5,
			},
			want: []byte{0x0a, 0x01, 's',
				0x12, 0x12, // graph_def
				0x0a, 0x0c, 0x0a, 0x01, 'n', 0x12, 0x04, 'N', 'o', 'O', 'p', 0x22, 0x01, 'd', // node
				0x22, 0x02, 0x08, 0x01, // versions
				0x30, 0x01, 0x38, 0x05},
		},
		{
			name: "RegisterGraphRequest graph_options=4 debug_options=5 config_proto=8",
			msg: &RegisterGraphRequest{
				GraphOptions: &GraphOptions{OptimizerOptions: &OptimizerOptions{OptLevel: OptimizerOptions_L0}},
				DebugOptions: &DebugOptions{GlobalStep: 3},
				ConfigProto:  &ConfigProto{Experimental: &ConfigProto_Experimental{ExecutorType: "x"}},
			},
			want: []byte{0x22, 0x0d, 0x1a, 0x0b, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
				0x2a, 0x02, 0x50, 0x03,
				0x42, 0x06, 0x82, 0x01, 0x03, 0x1a, 0x01, 'x'},
		},
		{
			name: "GraphDef library=2 (FunctionDef signature=1) debug_info=5 (files=1)",
			msg: &GraphDef{
				Library:   &FunctionDefLibrary{Function: []*FunctionDef{{Signature: &OpDef{Name: "f"}}}},
				DebugInfo: &GraphDebugInfo{Files: []string{"a"}},
			},
			want: []byte{0x12, 0x07, 0x0a, 0x05, 0x0a, 0x03, 0x0a, 0x01, 'f', 0x2a, 0x03, 0x0a, 0x01, 'a'},
		},
		{
			name: "GraphDebugInfo proto2 presence: FileLineCol line=2 set to zero is encoded",
			msg: &GraphDebugInfo{FramesById: map[uint64]*GraphDebugInfo_FileLineCol{
				1: {Line: proto.Int32(0)},
			}},
			want: []byte{0x22, 0x0d, 0x09, 1, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x02, 0x10, 0x00},
		},
		{
			name: "GraphOptions rewrite_options=10 (RewriterConfig constant_folding=3 optimizers=100)",
			msg: &GraphOptions{RewriteOptions: &RewriterConfig{
				ConstantFolding: RewriterConfig_OFF,
				Optimizers:      []string{"m"},
			}},
			want: []byte{0x52, 0x06, 0x18, 0x02, 0xa2, 0x06, 0x01, 'm'},
		},
		{
			name: "ConfigProto.Experimental coordination_config=23 (service_type=1)",
			msg:  &ConfigProto_Experimental{CoordinationConfig: &CoordinationServiceConfig{ServiceType: "s"}},
			want: []byte{0xba, 0x01, 0x03, 0x0a, 0x01, 's'},
		},
		{
			name: "DeregisterGraphRequest graph_handle=1 session_handle=2 create_worker_session_called=3",
			msg:  &DeregisterGraphRequest{GraphHandle: "g", SessionHandle: "s", CreateWorkerSessionCalled: true},
			want: []byte{0x0a, 0x01, 'g', 0x12, 0x01, 's', 0x18, 0x01},
		},
		{
			name: "CleanupGraphRequest step_id=1 negative",
			msg:  &CleanupGraphRequest{StepId: -1},
			want: []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		},
		{
			name: "DeviceAttributes name=1 device_type=2 memory_limit=4 incarnation=6 fixed64",
			msg: &DeviceAttributes{
				Name:        "c",
				DeviceType:  "CPU",
				MemoryLimit: 1,
				Incarnation: 0x0102030405060708,
			},
			want: []byte{0x0a, 0x01, 'c', 0x12, 0x03, 'C', 'P', 'U', 0x20, 0x01,
				0x31, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01},
		},
		{
			name: "RecvBufRequest buf_rendezvous_key=2 buf_ptr=4 fixed64 src_incarnation=11",
			msg:  &RecvBufRequest{StepId: 1, BufRendezvousKey: "b", BufPtr: 1, SrcIncarnation: 2},
			want: []byte{0x08, 0x01, 0x12, 0x01, 'b', 0x21, 1, 0, 0, 0, 0, 0, 0, 0, 0x58, 0x02},
		},
		{
			name: "CreateWorkerSessionRequest session_handle=1 server_def=2 isolate_session_state=3",
			msg: &CreateWorkerSessionRequest{
				SessionHandle:       "s",
				ServerDef:           &ServerDef{JobName: "w", TaskIndex: 1, Protocol: "grpc"},
				IsolateSessionState: true,
			},
			want: []byte{0x0a, 0x01, 's', 0x12, 0x0b, 0x12, 0x01, 'w', 0x18, 0x01, 0x2a, 0x04, 'g', 'r', 'p', 'c',
				0x18, 0x01},
		},
		{
			name: "ServerDef cluster=1 (JobDef name=1 tasks=2 map)",
			msg:  &ServerDef{Cluster: &ClusterDef{Job: []*JobDef{{Name: "w", Tasks: map[int32]string{0: "h"}}}}},
			want: []byte{0x0a, 0x0c, 0x0a, 0x0a, 0x0a, 0x01, 'w', 0x12, 0x05, 0x08, 0x00, 0x12, 0x01, 'h'},
		},
		{
			name: "AttrValue type=6",
			msg:  &AttrValue{Value: &AttrValue_Type{Type: DataType_DT_FLOAT}},
			want: []byte{0x30, 0x01},
		},
		{
			name: "AttrValue list=1 (s=2)",
			msg:  &AttrValue{Value: &AttrValue_List{List: &AttrValue_ListValue{S: [][]byte{[]byte("a")}}}},
			want: []byte{0x0a, 0x03, 0x12, 0x01, 'a'},
		},
		{
			name: "CompleteInstanceRequest data_type=3 shape=4 is_source=11",
			msg:  &CompleteInstanceRequest{DataType: DataType_DT_HALF, Shape: &TensorShapeProto{}, IsSource: true},
			want: []byte{0x18, 0x13, 0x22, 0x00, 0x58, 0x01},
		},
		{
			name: "CompleteGroupRequest group_key=1 collective_type=5 device_attributes=6",
			msg:  &CompleteGroupRequest{GroupKey: 1, CollectiveType: 2, DeviceAttributes: &DeviceAttributes{Name: "d"}},
			want: []byte{0x08, 0x01, 0x28, 0x02, 0x32, 0x03, 0x0a, 0x01, 'd'},
		},
		{
			name: "CompleteGroupResponse num_tasks=4 communicator_key=7 device_attributes=8",
			msg: &CompleteGroupResponse{NumTasks: 2, CommunicatorKey: []byte{9},
				DeviceAttributes: []*DeviceAttributes{{DeviceType: "CPU"}}},
			want: []byte{0x20, 0x02, 0x3a, 0x01, 0x09, 0x42, 0x05, 0x12, 0x03, 'C', 'P', 'U'},
		},
		{
			name: "GetStepSequenceResponse step_sequence=1 (graph_key=1 next_step_id=2)",
			msg:  &GetStepSequenceResponse{StepSequence: []*StepSequence{{GraphKey: 1, NextStepId: 2}}},
			want: []byte{0x0a, 0x04, 0x08, 0x01, 0x10, 0x02},
		},
	}
}

func TestGoldenEncoding(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			got, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.msg)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("encoding mismatch\n got %s\nwant %s", hex.EncodeToString(got), hex.EncodeToString(tc.want))
			}
		})
	}
}

func TestGoldenDecoding(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.msg.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(tc.want, got); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !proto.Equal(got, tc.msg) {
				t.Fatalf("decoded %v, want %v", got, tc.msg)
			}
			if len(got.ProtoReflect().GetUnknown()) != 0 {
				t.Fatalf("decoded unknown fields %x: a field is missing from the schema", got.ProtoReflect().GetUnknown())
			}
		})
	}
}

// TestUndeclaredFieldsSurviveRelay checks the promise made in the package
// doc: fields a TensorFlow peer sends that this package does not declare
// come back out byte for byte.
func TestUndeclaredFieldsSurviveRelay(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
		in   []byte
	}{
		{
			// step_id (1), then a field 15 that a later release might add.
			name: "RecvTensorRequest future field",
			msg:  &RecvTensorRequest{},
			in:   []byte{0x08, 0x01, 0x7a, 0x01, 'z'},
		},
		{
			// collective_group_leader (1), then a field 99 unknown to this schema.
			name: "ConfigProto.Experimental future field",
			msg:  &ConfigProto_Experimental{},
			in:   []byte{0x0a, 0x01, 'l', 0x98, 0x06, 0x01},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := proto.Unmarshal(tc.in, tc.msg); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if len(tc.msg.ProtoReflect().GetUnknown()) == 0 {
				t.Fatal("expected the undeclared field to be kept as unknown")
			}
			out, err := proto.Marshal(tc.msg)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if !bytes.Equal(out, tc.in) {
				t.Fatalf("relayed bytes differ\n got %x\nwant %x", out, tc.in)
			}
		})
	}
}
