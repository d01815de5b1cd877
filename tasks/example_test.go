package tasks_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
)

// A cluster of one parameter server and one worker in this process, each
// task asked for its device over the driver's Callers.
func Example() {
	dir, err := os.MkdirTemp("", "tasks-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	l, err := tasks.StartLocal(tasks.LocalOptions{PS: 1, Workers: 1, Protocol: cluster.ProtocolGRPCSeastar,
		Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	ctx := context.Background()
	if err := tasks.Await(ctx, l.Layout, 10*time.Second); err != nil {
		fmt.Println(err)
		return
	}
	peers := tasks.NewPeers(l.Layout)
	defer peers.Close()
	for _, task := range []string{cluster.TaskName("ps", 0), cluster.TaskName("worker", 0)} {
		c, err := peers.Caller(task)
		if err != nil {
			fmt.Println(err)
			return
		}
		st, err := c.GetStatus(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(st.GetDeviceAttributes()[0].GetName())
	}
	// Output:
	// /job:ps/replica:0/task:0/device:CPU:0
	// /job:worker/replica:0/task:0/device:CPU:0
}

// One task serving its cluster, as "starwire serve" does: bound on ports
// the kernel picks, then started with the layout every task of the
// cluster shares.
func ExampleListen() {
	s, err := tasks.Listen("ps", 0, "127.0.0.1:0", "127.0.0.1:0", true, tasks.TCPNet{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	spec, err := cluster.NewSpec(map[string][]string{"ps": {s.GRPCAddr}})
	if err != nil {
		fmt.Println(err)
		return
	}
	em := cluster.NewEndpointMap("")
	if err := em.Add(s.GRPCAddr, s.StarAddr); err != nil {
		fmt.Println(err)
		return
	}
	layout := tasks.Layout{Protocol: cluster.ProtocolGRPCSeastar, Cluster: spec, Endpoints: em}
	if err := s.Start(layout, slog.New(slog.DiscardHandler)); err != nil {
		fmt.Println(err)
		return
	}
	if err := tasks.Await(context.Background(), layout, 10*time.Second); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Task(), "serves; peer calls over", s.PeerPath())
	// Output:
	// /job:ps/replica:0/task:0 serves; peer calls over TCP
}
