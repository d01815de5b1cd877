package train_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
	"github.com/starwire/starwire/train"
)

// A progress line every 10 global steps of a run on an in-process
// cluster of one parameter server and one worker, with the mean loss of
// the steps since the last line. Every would add a line every interval
// of time, from Run, while the run goes on or waits.
func ExampleProgressHook() {
	dir, err := os.MkdirTemp("", "train-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	local, err := tasks.StartLocal(tasks.LocalOptions{PS: 1, Workers: 1, Protocol: cluster.ProtocolGRPCSeastar,
		Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer local.Close()
	ctx := context.Background()
	if err := tasks.Await(ctx, local.Layout, 10*time.Second); err != nil {
		fmt.Println(err)
		return
	}
	peers := tasks.NewPeers(local.Layout)
	defer peers.Close()
	var callers []driver.Caller
	for _, task := range []string{cluster.TaskName("ps", 0), cluster.TaskName("worker", 0)} {
		c, err := peers.Caller(task)
		if err != nil {
			fmt.Println(err)
			return
		}
		callers = append(callers, c)
	}
	m := &numberModel{target: 3, rate: 0.05}
	s := train.NewSession(driver.New("example-progress", callers...), m, train.Options{PS: 1, Workers: 1, Steps: 30})
	if err := s.Setup(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close(ctx)

	h := train.NewProgressHook(s, train.ProgressOptions{Steps: 10}, func(p train.Progress) {
		fmt.Printf("step %d/30: %d steps in the interval, loss %.4f\n", p.Steps, p.DoneInInterval, p.Loss)
	})
	s.AfterStep(h.AfterStep)
	h.Begin()
	if err := s.Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// Output:
	// step 10/30: 10 steps in the interval, loss 4.1610
	// step 20/30: 10 steps in the interval, loss 0.5059
	// step 30/30: 10 steps in the interval, loss 0.0615
}
