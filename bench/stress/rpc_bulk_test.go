package stress_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/starwire/starwire/bench/stress"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// maxOverrun is the most a call may outlive its deadline.
const maxOverrun = 100 * time.Millisecond

// TestStressBulkTCP runs the two-way bulk load (stress.Bulk: 40 callers on
// one connection, 4–16 MiB echoes, for bulkWindow) against a server in
// another process: every call must be answered correctly or fail with
// DeadlineExceeded, none may return more than maxOverrun after its
// deadline, and none may hang. It runs alone, before the package's
// parallel tests: the load it checks is its own.
func TestStressBulkTCP(t *testing.T) {
	p := startStressServer(t)
	c := rpc.NewClient(p.Addr, rpc.ClientOptions{Transport: &tcp.Transport{}})
	defer c.Close()
	w := stress.Bulk("tcp bulk 40×4–16MiB", bulkWindow)
	r := runBounded(t, p, c, w)
	for _, problem := range r.Problems(w, maxOverrun, wire.DeadlineExceeded) {
		t.Error(problem)
	}
}

// bulkWindow is how long the bulk load issues calls. What it checks holds
// per call, not per second: every answer's bytes are verified, every call
// whose short deadline (a quarter of them, 20ms–2s) passes while its
// frames are queued or half sent must end within maxOverrun, and a hang
// shows as a call still in flight. 8s is twenty times the longest call on
// an idle 2-core machine (a 16 MiB echo queued behind 39 others), so each
// caller cycles through dozens of calls, sizes and deadlines, and a
// thousand and more calls are verified, dozens ending by their deadline
// mid-transfer; a loaded machine makes fewer, and Problems still demands
// an answer per caller and half the calls answered.
const bulkWindow = 8 * time.Second

// hangAfter is how long past the last deadline a call still in flight
// counts as hung. It stands above any overrun Problems accepts on a loaded
// machine (maxOverrun plus three times a lateness of a second and more has
// been seen beside a compiler), so that a slow call is judged as an
// overrun, not reported hung; a call that is hung never returns at all.
const hangAfter = 10 * time.Second

// runBounded runs w, and fails the test with both processes' goroutines
// when calls are still in flight well past the last deadline.
func runBounded(t *testing.T, p *stress.Proc, c *rpc.Client, w stress.Workload) *stress.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), w.Duration+w.Deadline+hangAfter)
	defer cancel()
	r := w.Run(ctx, c)
	stress.FormatReports(os.Stderr, r)
	if r.Hung > 0 {
		dumpBoth(t, p)
		c.Close()
		t.Fatalf("%d calls hung, the oldest for %v (deadlines are at most %v)", r.Hung, r.OldestHung, w.Deadline)
	}
	return r
}
