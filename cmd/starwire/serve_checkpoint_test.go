package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestServeCheckpointDir runs serve --checkpoint_dir and saves through its
// gRPC WorkerService as a TensorFlow master would, the prefix fed as a
// TensorFlow client encodes strings: a prefix inside the directory,
// absolute or relative, is saved there; one outside it, absolute or
// climbing out, is refused with PermissionDenied naming the directory.
// Without the flag, a save is FailedPrecondition naming it.
func TestServeCheckpointDir(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	spec := "ps=" + freePort(t) + ";worker=" + freePort(t)
	p := startBinary(t, nil, "serve", "--job", "ps", "--protocol", "grpc", "--cluster", spec, "--report", "0", "--checkpoint_dir", ckpt)
	p.waitLine(t, regexp.MustCompile(`serving:`), 20*time.Second)
	addr := strings.TrimPrefix(strings.Split(spec, ";")[0], "ps=")
	save := saveThrough(t, addr)
	for _, tc := range []struct {
		prefix string
		code   codes.Code
		file   string // written, when the save succeeds
	}{
		{filepath.Join(ckpt, "model.ckpt-1"), codes.OK, filepath.Join(ckpt, "model.ckpt-1.index")},
		{"run/model.ckpt-2", codes.OK, filepath.Join(ckpt, "run", "model.ckpt-2.index")},
		{filepath.Join(ckpt, "model.ckpt_temp/part-00000-of-00001"), codes.OK, filepath.Join(ckpt, "model.ckpt_temp", "part-00000-of-00001.index")},
		{filepath.Join(dir, "elsewhere", "model.ckpt"), codes.PermissionDenied, ""},
		{"../model.ckpt", codes.PermissionDenied, ""},
		{ckpt + "x/model.ckpt", codes.PermissionDenied, ""},
	} {
		err := save(tc.prefix)
		if status.Code(err) != tc.code {
			t.Errorf("save to %s: %v, want %v", tc.prefix, err, tc.code)
			continue
		}
		if tc.code == codes.PermissionDenied && !strings.Contains(status.Convert(err).Message(), ckpt) {
			t.Errorf("save to %s: %q does not name the directory %s", tc.prefix, status.Convert(err).Message(), ckpt)
		}
		if tc.file != "" {
			if _, err := os.Stat(tc.file); err != nil {
				t.Errorf("save to %s: %v", tc.prefix, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "elsewhere")); !os.IsNotExist(err) {
		t.Errorf("a refused save made %s: %v", filepath.Join(dir, "elsewhere"), err)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("serve exited %d:\n%s", code, p.stderr.String())
	}

	spec = "ps=" + freePort(t) + ";worker=" + freePort(t)
	p = startBinary(t, nil, "serve", "--job", "ps", "--protocol", "grpc", "--cluster", spec, "--report", "0")
	p.waitLine(t, regexp.MustCompile(`serving:`), 20*time.Second)
	err := saveThrough(t, strings.TrimPrefix(strings.Split(spec, ";")[0], "ps="))("model.ckpt")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--checkpoint_dir") {
		t.Errorf("save without --checkpoint_dir: %v, want FailedPrecondition naming the flag", err)
	}
	p.stop(t, syscall.SIGTERM)
}

// saveThrough registers on the ps task at addr a graph saving a constant
// under a fed prefix, and returns a function running it with a prefix.
func saveThrough(t *testing.T, addr string) func(prefix string) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := tfpb.NewWorkerServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	const (
		dev    = "/job:ps/replica:0/task:0/device:CPU:0"
		client = "/job:worker/replica:0/task:0/device:CPU:0"
	)
	str := func(vals ...string) *tfpb.TensorProto {
		elems := make([][]byte, len(vals))
		for i, v := range vals {
			elems[i] = []byte(v)
		}
		return &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: tensor.ShapeToProto([]int64{int64(len(vals))}), TensorContent: tensor.AppendStringList(nil, elems)}
	}
	attr := func(kv ...any) map[string]*tfpb.AttrValue {
		m := map[string]*tfpb.AttrValue{}
		for i := 0; i < len(kv); i += 2 {
			switch v := kv[i+1].(type) {
			case tfpb.DataType:
				m[kv[i].(string)] = &tfpb.AttrValue{Value: &tfpb.AttrValue_Type{Type: v}}
			case *tfpb.TensorProto:
				m[kv[i].(string)] = &tfpb.AttrValue{Value: &tfpb.AttrValue_Tensor{Tensor: v}}
			case []tfpb.DataType:
				m[kv[i].(string)] = &tfpb.AttrValue{Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{Type: v}}}
			case string:
				m[kv[i].(string)] = &tfpb.AttrValue{Value: &tfpb.AttrValue_S{S: []byte(v)}}
			case int64:
				m[kv[i].(string)] = &tfpb.AttrValue{Value: &tfpb.AttrValue_I{I: v}}
			case bool:
				m[kv[i].(string)] = &tfpb.AttrValue{Value: &tfpb.AttrValue_B{B: v}}
			}
		}
		return m
	}
	str32 := tfpb.DataType_DT_STRING
	g := &tfpb.GraphDef{Node: []*tfpb.NodeDef{
		{Name: "save/Const", Op: "_Recv", Attr: attr("tensor_type", str32, "tensor_name", "save/Const:0", "send_device", client,
			"send_device_incarnation", int64(1), "recv_device", dev, "client_terminated", true)},
		{Name: "save/SaveV2/tensor_names", Op: "Const", Attr: attr("dtype", str32, "value", str("w"))},
		{Name: "save/SaveV2/shape_and_slices", Op: "Const", Attr: attr("dtype", str32, "value", str(""))},
		{Name: "w", Op: "Const", Attr: attr("dtype", tfpb.DataType_DT_FLOAT, "value",
			&tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, FloatVal: []float32{1.5}})},
		{Name: "save/SaveV2", Op: "SaveV2", Input: []string{"save/Const", "save/SaveV2/tensor_names", "save/SaveV2/shape_and_slices", "w"},
			Attr: attr("dtypes", []tfpb.DataType{tfpb.DataType_DT_FLOAT})},
	}}
	reg, err := c.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: g})
	if err != nil {
		t.Fatal(err)
	}
	step := int64(0)
	return func(prefix string) error {
		step++
		p := str(prefix)
		p.TensorShape = tensor.ShapeToProto(nil)
		key := rendezvous.CreateKey(client, 1, dev, "save/Const:0", rendezvous.FrameIter{})
		_, err := c.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: step,
			Send: []*tfpb.NamedTensorProto{{Name: key, Tensor: p}}})
		c.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: step})
		return err
	}
}
