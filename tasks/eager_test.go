package tasks

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestEagerServiceOnGRPCPort: a task serves TensorFlow's EagerService on
// its gRPC port, CreateContext answering the worker's device and
// incarnation, an unknown context Aborted.
func TestEagerServiceOnGRPCPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := StartLocal(LocalOptions{PS: 1, Workers: 1, Protocol: cluster.ProtocolGRPC, Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := l.Servers[0]
	cc, err := grpc.NewClient(s.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ec := tfpb.NewEagerServiceClient(cc)
	resp, err := ec.CreateContext(ctx, &tfpb.CreateContextRequest{ContextId: 5, KeepAliveSecs: 60})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDeviceAttributes(); len(d) != 1 || d[0].GetName() != s.Worker().Device() || d[0].GetIncarnation() != s.Worker().Incarnation() {
		t.Fatalf("CreateContext answered devices %v, want %s", d, s.Worker().Device())
	}
	if _, err := ec.KeepAlive(ctx, &tfpb.KeepAliveRequest{ContextId: 5}); err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	if _, err := ec.KeepAlive(ctx, &tfpb.KeepAliveRequest{ContextId: 6}); status.Code(err) != codes.Aborted {
		t.Fatalf("KeepAlive of an unknown context: %v, want Aborted", err)
	}
}
