package train_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
	"github.com/starwire/starwire/train"
)

// A model of the example's own, trained on an in-process cluster of one
// parameter server and two workers: a session runs both replicas'
// steps, and a hook watches the global step.
func Example() {
	dir, err := os.MkdirTemp("", "train-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	local, err := tasks.StartLocal(tasks.LocalOptions{PS: 1, Workers: 2, Protocol: cluster.ProtocolGRPCSeastar,
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
	for _, task := range []string{cluster.TaskName("ps", 0), cluster.TaskName("worker", 0), cluster.TaskName("worker", 1)} {
		c, err := peers.Caller(task)
		if err != nil {
			fmt.Println(err)
			return
		}
		callers = append(callers, c)
	}
	d := driver.New("example", callers...)

	m := &numberModel{target: 3, rate: 0.05}
	s := train.NewSession(d, m, train.Options{PS: 1, Workers: 2, Steps: 50})
	var halfway int64
	s.AfterStep(func(_ context.Context, step int64) error {
		if step == 50 {
			halfway = step
		}
		return nil
	})
	if err := s.Setup(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close(ctx)
	if err := s.Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	done, lost := s.Steps()
	losses := s.Losses(0)
	fmt.Printf("global step %d (%d done, %d lost); the hook saw step %d\n", s.GlobalStep(), done, lost, halfway)
	// The best loss, not the last: the step that completes last may have
	// read w long before, when the other worker ran ahead.
	fmt.Printf("loss at w = 0: %.1f; best below 1e-6: %v\n", slices.Max(losses), slices.Min(losses) < 1e-6)
	// Output:
	// global step 100 (100 done, 0 lost); the hook saw step 50
	// loss at w = 0: 9.0; best below 1e-6: true
}
