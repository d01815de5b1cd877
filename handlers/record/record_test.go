package record_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers/record"
	"github.com/starwire/starwire/wire/tfpb"
)

func TestInterceptorWritesRequestsInOrder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	ic, err := record.Interceptor(dir)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	h := func(context.Context, any) (any, error) { calls++; return &tfpb.RunGraphResponse{}, nil }
	reqs := []*tfpb.RunGraphRequest{{GraphHandle: "g1", StepId: 1}, {GraphHandle: "g2", StepId: 2}}
	for _, r := range reqs {
		info := &grpc.UnaryServerInfo{FullMethod: "/tensorflow.WorkerService/RunGraph"}
		if _, err := ic(context.Background(), r, info, h); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 {
		t.Fatalf("handler called %d times, want 2", calls)
	}
	for i, want := range reqs {
		b, err := os.ReadFile(filepath.Join(dir, []string{"00001-RunGraph.pb", "00002-RunGraph.pb"}[i]))
		if err != nil {
			t.Fatal(err)
		}
		got := &tfpb.RunGraphRequest{}
		if err := proto.Unmarshal(b, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("file %d holds %v, want %v", i+1, got, want)
		}
	}
}

func TestInterceptorFailsCallWhenItCannotWrite(t *testing.T) {
	dir := t.TempDir()
	ic, err := record.Interceptor(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	if os.Geteuid() == 0 {
		// root writes through the mode: make the file's name a directory.
		os.Chmod(dir, 0o755)
		os.Mkdir(filepath.Join(dir, "00001-RunGraph.pb"), 0o755)
	}
	called := false
	h := func(context.Context, any) (any, error) { called = true; return nil, nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/tensorflow.WorkerService/RunGraph"}
	if _, err := ic(context.Background(), &tfpb.RunGraphRequest{}, info, h); err == nil || called {
		t.Fatalf("call with an unwritable record: err %v, handler called %v", err, called)
	}
}
