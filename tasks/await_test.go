package tasks

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starwire/starwire/rpc/cluster"
)

// TestAwaitSome: with a worker down, Await gives up naming it, AwaitSome
// returns at once with it missing, and with every worker down AwaitSome
// gives up too.
func TestAwaitSome(t *testing.T) {
	l, err := StartLocal(LocalOptions{PS: 1, Workers: 2, Protocol: cluster.ProtocolGRPCSeastar, Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	l.Servers[2].Close() // worker:1
	down := cluster.TaskName("worker", 1)
	if err := Await(ctx, l.Layout, 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), down) {
		t.Errorf("Await: %v, want the down worker named", err)
	}
	missing, err := AwaitSome(ctx, l.Layout, 10*time.Second, "worker")
	if err != nil || !slices.Equal(missing, []string{down}) {
		t.Errorf("AwaitSome: %v, %v; want %s missing", missing, err, down)
	}
	l.Servers[1].Close() // worker:0
	if _, err := AwaitSome(ctx, l.Layout, 300*time.Millisecond, "worker"); err == nil {
		t.Error("AwaitSome returned with no worker answering")
	}
}
