package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/starwire/starwire/cmd/starwire/internal/lr"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
)

// A peerInfo is what a task said about its calls to its peers, or why it
// said nothing.
type peerInfo struct {
	tasks.Info
	err error
}

// A routeNote says what carried a job's calls: the protocol, the driver's
// transport (described, and the path name its calls count under), and why
// the tasks' calls to each other took the paths they did.
type routeNote struct {
	protocol   cluster.Protocol
	driver     string // "starwire over TCP"
	driverPath string // "TCP"
	why        string
}

// printSummary prints the run's outcome. infos say what carried the
// tasks' calls to each other; local says they ran in this process, whose
// RPC counts already include those calls.
func printSummary(w io.Writer, s *lr.Summary, route routeNote, infos []peerInfo, local bool) {
	fmt.Fprintf(w, "summary:\n")
	fmt.Fprintf(w, "  steps %d, examples %d in %.2fs: %.0f examples/s\n", s.Steps, s.Examples, s.Elapsed.Seconds(), s.ExamplesPerSec())
	if s.LostSteps > 0 {
		fmt.Fprintf(w, "  steps lost in flight with a lost task: %d\n", s.LostSteps)
	}
	if s.UndoneSteps > 0 {
		fmt.Fprintf(w, "  global steps undone by recovery: %d\n", s.UndoneSteps)
		if s.LastStep != 0 {
			fmt.Fprintf(w, "  redone: %d, so that the run ends at global step %d, as asked\n", s.UndoneSteps, s.GlobalStep)
		}
	}
	fmt.Fprintf(w, "  held-out loss: initial %.4f, final %.4f (hidden model %.4f, click rate alone %.4f)\n", s.InitialLoss, s.FinalLoss, s.BayesLoss, s.BaseRateLoss)
	fmt.Fprintf(w, "  training loss: first tenth %.4f, last tenth %.4f\n", s.FirstTrainLoss, s.LastTrainLoss)
	fmt.Fprintf(w, "  held-out accuracy: %.2f%%\n", 100*s.Accuracy)
	calls, bytes := s.Calls, s.Bytes
	which := "driver and task-to-task"
	if !local {
		known := true
		for _, i := range infos {
			calls, bytes = calls+i.PeerCalls, bytes+i.PeerBytes
			known = known && i.err == nil
		}
		if !known {
			which = "driver and the task-to-task calls of the tasks that answered"
		}
	}
	secs := s.Elapsed.Seconds()
	fmt.Fprintf(w, "  RPCs (%s): %d (%.0f/s), bytes moved: %.1f MB (%.1f MB/s)\n", which, calls, float64(calls)/secs, float64(bytes)/1e6, float64(bytes)/1e6/secs)
	if len(s.PSBytes) > 0 {
		fmt.Fprintf(w, "  bytes per ps task (%s): %s\n", psWhich(local), psBytes(s.PSBytes))
	}
	fmt.Fprintf(w, "  protocol: %s; driver's calls over %s\n", route.protocol, route.driver)
	fmt.Fprintf(w, "  tasks' calls to each other: %s\n", peerPaths(infos, true))
	fmt.Fprintf(w, "  path: %s\n", describeShares(jobPaths(calls, bytes, route.driverPath, infos)))
	fmt.Fprintf(w, "  why: the driver's calls over %s (--transport); the tasks' calls to each other: %s\n", route.driverPath, route.why)
}

// psWhich says what the bytes per ps task count.
func psWhich(local bool) string {
	if local {
		return "the driver's calls to it and the tasks' calls to and from it"
	}
	return "the driver's calls to it"
}

// psBytes lists the bytes each ps task moved, and their largest share.
func psBytes(b []int64) string {
	var parts []string
	var total, most int64
	for i, n := range b {
		parts = append(parts, fmt.Sprintf("ps:%d %.1f MB", i, float64(n)/1e6))
		total += n
		most = max(most, n)
	}
	return fmt.Sprintf("%s; total %.1f MB, the most one moved %.1f MB", strings.Join(parts, ", "), float64(total)/1e6, float64(most)/1e6)
}

// peerPaths says what carries each task's calls to its peers, tasks with
// the same path together: "TCP (ps:0, worker:0)". With counts, it says
// what carried them, from the paths the transports reported per call
// (tasks.Info.PeerPaths), and how many calls and bytes each task's took
// each path: "TCP (ps:0 8041 calls, 154.4 MB); AF_XDP (ps:0 23 calls,
// 0.3 MB)"; a task without those counts (gRPC) is listed under PeerPath.
func peerPaths(infos []peerInfo, counts bool) string {
	var order []string
	groups := map[string][]string{}
	add := func(path, who string) {
		if _, ok := groups[path]; !ok {
			order = append(order, path)
		}
		groups[path] = append(groups[path], who)
	}
	for _, i := range infos {
		who := shortTask(i.Task)
		switch {
		case i.err != nil:
			add("unknown", who+": "+tasks.ShortError(i.err))
		case !counts:
			add(i.PeerPath, who)
		case len(i.PeerPaths) == 0:
			add(i.PeerPath, who+fmt.Sprintf(" %d calls, %.1f MB", i.PeerCalls, float64(i.PeerBytes)/1e6))
		default:
			for _, p := range i.PeerPaths {
				add(p.Path.Title(), who+fmt.Sprintf(" %d calls, %.1f MB", p.Calls, float64(p.Bytes)/1e6))
			}
		}
	}
	parts := make([]string, len(order))
	for k, path := range order {
		parts[k] = path + " (" + strings.Join(groups[path], "; ") + ")"
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// shortTask writes "/job:ps/replica:0/task:1" as "ps:1".
func shortTask(task string) string {
	job, i, err := cluster.ParseTaskName(task)
	if err != nil {
		return task
	}
	return fmt.Sprintf("%s:%d", job, i)
}

// peerDeltas returns after's counts less before's, task by task: what the
// tasks' calls to their peers moved between the two. A task whose counts
// went down restarted in between, and all of after's are counted; one
// that did not answer before is reported as unknown.
func peerDeltas(before, after []peerInfo) []peerInfo {
	prev := make(map[string]peerInfo, len(before))
	for _, b := range before {
		prev[b.Task] = b
	}
	out := make([]peerInfo, len(after))
	for i, a := range after {
		out[i] = a
		if a.err != nil {
			continue
		}
		b, ok := prev[a.Task]
		switch {
		case !ok || b.err != nil:
			out[i].err = fmt.Errorf("its counts before the run are unknown")
		case a.PeerCalls >= b.PeerCalls && a.PeerBytes >= b.PeerBytes:
			out[i].PeerCalls -= b.PeerCalls
			out[i].PeerBytes -= b.PeerBytes
			out[i].PeerPaths = pathDeltas(b.PeerPaths, a.PeerPaths)
		}
	}
	return out
}

// pathDeltas returns after's per-path counts less before's, leaving out
// the paths that carried nothing between the two.
func pathDeltas(before, after []tasks.PathCount) []tasks.PathCount {
	var out []tasks.PathCount
	for _, a := range after {
		for _, b := range before {
			if b.Path == a.Path {
				a.Calls, a.Bytes = a.Calls-b.Calls, a.Bytes-b.Bytes
			}
		}
		if a.Calls > 0 {
			out = append(out, a)
		}
	}
	return out
}
