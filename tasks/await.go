package tasks

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/wire"
)

// awaitEvery is the interval between Await's rounds of GetStatus calls.
const awaitEvery = 200 * time.Millisecond

// Await waits until every task of l answers GetStatus on its gRPC
// address, the master-side service every task keeps, as TensorFlow's
// master asks whatever the worker protocol; it gives up after timeout
// with an error naming the tasks that never answered, and at once when a
// task refuses this client (TLS it lacks, a certificate it does not
// take), which waiting cannot change.
func Await(ctx context.Context, l Layout, timeout time.Duration) error {
	_, err := await(ctx, l, timeout, "")
	return err
}

// AwaitSome is Await for a job that may start without some tasks of job
// (a worker that comes later joins the run): it returns once every task
// of the other jobs and one of job answer, with the tasks of job that did
// not answer yet.
func AwaitSome(ctx context.Context, l Layout, timeout time.Duration, job string) (missing []string, err error) {
	return await(ctx, l, timeout, job)
}

func await(ctx context.Context, l Layout, timeout time.Duration, optional string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pending := map[string]string{}
	for _, job := range l.Cluster.Jobs() {
		for _, i := range l.Cluster.TaskIndices(job) {
			addr, _ := l.Cluster.Lookup(job, i)
			pending[cluster.TaskName(job, i)] = addr
		}
	}
	last := map[string]error{}
	opts, err := l.GRPCDialOptions()
	if err != nil {
		return nil, err
	}
	for {
		for task, addr := range pending {
			c, err := handlers.DialGRPC(task, addr, opts...)
			if err == nil {
				callCtx, cancel := context.WithTimeout(ctx, time.Second)
				_, err = c.GetStatus(callCtx)
				cancel()
				c.Close()
			}
			if err == nil {
				delete(pending, task)
			} else {
				last[task] = err
			}
		}
		if missing, ok := enough(l, pending, optional); ok {
			return missing, nil
		}
		if err := refusedBy(pending, last); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			var parts []string
			for task, addr := range pending {
				parts = append(parts, fmt.Sprintf("%s at %s (%v)", task, addr, ShortError(last[task])))
			}
			sort.Strings(parts)
			return nil, fmt.Errorf("cluster unreachable after %v: %s", timeout, strings.Join(parts, "; "))
		case <-time.After(awaitEvery):
		}
	}
}

// enough reports whether the tasks still pending may be left: none, or
// only tasks of job optional while one of its tasks answered; missing
// are those, sorted.
func enough(l Layout, pending map[string]string, optional string) (missing []string, ok bool) {
	if len(pending) == 0 {
		return nil, true
	}
	if optional == "" {
		return nil, false
	}
	for task := range pending {
		job, _, err := cluster.ParseTaskName(task)
		if err != nil || job != optional {
			return nil, false
		}
		missing = append(missing, task)
	}
	if len(missing) == l.Cluster.NumTasks(optional) {
		return nil, false
	}
	sort.Strings(missing)
	return missing, true
}

// refusedBy returns an error naming the tasks that refused this client
// (unauthenticated), nil when none did.
func refusedBy(pending map[string]string, last map[string]error) error {
	var parts []string
	for task, addr := range pending {
		if rpc.CodeOf(last[task]) == wire.Unauthenticated {
			parts = append(parts, fmt.Sprintf("%s at %s (%v)", task, addr, ShortError(last[task])))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	sort.Strings(parts)
	return fmt.Errorf("cluster refused this client: %s", strings.Join(parts, "; "))
}

// ShortError keeps the innermost cause of a long wrapped call error: the
// message of the status a task answered, or the whole error; "no answer"
// for nil.
func ShortError(err error) string {
	if err == nil {
		return "no answer"
	}
	var st *rpc.Status
	if errors.As(err, &st) {
		return st.Msg
	}
	return err.Error()
}
