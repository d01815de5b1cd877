package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/tasks"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/wire"
)

// awaitCluster waits until every task answers GetStatus on its gRPC
// address, the master-side service every task keeps, polling until
// timeout; the error names the tasks that never answered.
func awaitCluster(ctx context.Context, l tasks.Layout, timeout time.Duration) error {
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
		return err
	}
	for {
		for task, addr := range pending {
			c, err := driver.DialGRPC(task, addr, opts...)
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
		if len(pending) == 0 {
			return nil
		}
		if err := refusedBy(pending, last); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			var parts []string
			for task, addr := range pending {
				parts = append(parts, fmt.Sprintf("%s at %s (%v)", task, addr, shortErr(last[task])))
			}
			return fmt.Errorf("cluster unreachable after %v: %s", timeout, strings.Join(parts, "; "))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// refusedBy returns an error naming the tasks that refused this client
// (unauthenticated: TLS it lacks or a certificate they do not take), which
// waiting longer cannot change; nil when none did.
func refusedBy(pending map[string]string, last map[string]error) error {
	var parts []string
	for task, addr := range pending {
		if rpc.CodeOf(last[task]) == wire.Unauthenticated {
			parts = append(parts, fmt.Sprintf("%s at %s (%v)", task, addr, shortErr(last[task])))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	sort.Strings(parts)
	return fmt.Errorf("cluster refused this client: %s", strings.Join(parts, "; "))
}

// shortErr keeps the innermost cause of a long wrapped error.
func shortErr(err error) string {
	if err == nil {
		return "no answer"
	}
	var st *rpc.Status
	if errors.As(err, &st) {
		return st.Msg
	}
	return err.Error()
}

// endpointPairs lists an endpoint map on one line.
func endpointPairs(m cluster.EndpointMap) string {
	var parts []string
	for g, s := range m.All() {
		parts = append(parts, g+"="+s)
	}
	return strings.Join(parts, " ")
}
