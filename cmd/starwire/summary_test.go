package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/tasks"
)

// TestPeerDeltas: a joined cluster's tasks count since they started; the
// summary reports what changed during the run.
func TestPeerDeltas(t *testing.T) {
	info := func(task string, calls, bytes int64) peerInfo {
		return peerInfo{Info: tasks.Info{Task: task, PeerCalls: calls, PeerBytes: bytes}}
	}
	down := peerInfo{Info: tasks.Info{Task: "w"}, err: errors.New("no answer")}
	for _, tc := range []struct {
		name          string
		before, after []peerInfo
		calls, bytes  int64
		unknown       bool
	}{
		{"counted since start", []peerInfo{info("w", 24000, 9e6)}, []peerInfo{info("w", 25200, 10e6)}, 1200, 1e6, false},
		{"restarted in between", []peerInfo{info("w", 24000, 9e6)}, []peerInfo{info("w", 300, 2e5)}, 300, 2e5, false},
		{"no answer before", []peerInfo{down}, []peerInfo{info("w", 5, 5)}, 5, 5, true},
		{"no answer after", []peerInfo{info("w", 5, 5)}, []peerInfo{down}, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := peerDeltas(tc.before, tc.after)
			if len(got) != 1 {
				t.Fatalf("%d infos, want 1", len(got))
			}
			if (got[0].err != nil) != tc.unknown {
				t.Errorf("err %v, want unknown %v", got[0].err, tc.unknown)
			}
			if !tc.unknown && (got[0].PeerCalls != tc.calls || got[0].PeerBytes != tc.bytes) {
				t.Errorf("%d calls, %d bytes; want %d, %d", got[0].PeerCalls, got[0].PeerBytes, tc.calls, tc.bytes)
			}
		})
	}
}

// TestPeerPathsSayWhatCarriedTheCalls: the summary's headline groups the
// tasks by the paths their calls took, from the per-call counts, not by
// the path their connections could take.
func TestPeerPathsSayWhatCarriedTheCalls(t *testing.T) {
	infos := []peerInfo{
		{Info: tasks.Info{Task: "/job:ps/replica:0/task:0", PeerPath: "AF_XDP over veth pairs to the workers", PeerCalls: 4064,
			PeerPaths: []tasks.PathCount{{Path: "tcp", Calls: 4013, Bytes: 77e6}, {Path: "afxdp", Calls: 51, Bytes: 3e5}}}},
		{Info: tasks.Info{Task: "/job:worker/replica:0/task:0", PeerPath: "AF_XDP over veth pairs to the parameter servers", PeerCalls: 2000,
			PeerPaths: []tasks.PathCount{{Path: "tcp", Calls: 2000, Bytes: 61e6}}}},
		{Info: tasks.Info{Task: "/job:worker/replica:0/task:1", PeerPath: "gRPC", PeerCalls: 7, PeerBytes: 1e5}},
	}
	want := "TCP (ps:0 4013 calls, 77.0 MB; worker:0 2000 calls, 61.0 MB); AF_XDP (ps:0 51 calls, 0.3 MB); gRPC (worker:1 7 calls, 0.1 MB)"
	if got := peerPaths(infos, true); got != want {
		t.Errorf("headline\n%s\nwant\n%s", got, want)
	}
	before := []tasks.PathCount{{Path: "tcp", Calls: 10, Bytes: 100}, {Path: "afxdp", Calls: 51, Bytes: 3e5}}
	after := []tasks.PathCount{{Path: "tcp", Calls: 25, Bytes: 400}, {Path: "afxdp", Calls: 51, Bytes: 3e5}}
	if got := pathDeltas(before, after); len(got) != 1 || got[0] != (tasks.PathCount{Path: "tcp", Calls: 15, Bytes: 300}) {
		t.Errorf("pathDeltas: %+v", got)
	}
}

// TestSummaryPathLine: the summary's path line gives each path's share of
// the job's calls and bytes, the driver's (the rest of the RPC count)
// with the tasks' by the paths their transports reported, and its why
// line names the reason for the tasks' paths.
func TestSummaryPathLine(t *testing.T) {
	infos := []peerInfo{
		{Info: tasks.Info{Task: "/job:ps/replica:0/task:0", PeerCalls: 800, PeerBytes: 8e6,
			PeerPaths: []tasks.PathCount{{Path: "tcp", Calls: 600, Bytes: 2e6}, {Path: "afxdp", Calls: 200, Bytes: 6e6}}}},
		{Info: tasks.Info{Task: "/job:worker/replica:0/task:0", PeerCalls: 200, PeerBytes: 2e6,
			PeerPaths: []tasks.PathCount{{Path: "afxdp", Calls: 200, Bytes: 2e6}}}},
	}
	// 2000 calls and 20 MB in all: the driver's 1000 calls, 10 MB over TCP.
	var b strings.Builder
	printSummary(&b, &trainSummary{Steps: 1, Calls: 2000, Bytes: 20e6, Elapsed: time.Second},
		routeNote{protocol: "grpc+seastar", driver: "starwire over TCP", driverPath: "TCP", why: "AF_XDP off (--afxdp off)"}, infos, true)
	want := "  path: TCP 80.0% of calls (1600), 60.0% of bytes; AF_XDP 20.0% of calls (400), 40.0% of bytes\n" +
		"  why: the driver's calls over TCP (--transport); the tasks' calls to each other: AF_XDP off (--afxdp off)\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("summary ends\n%s\nwant\n%s", b.String(), want)
	}
}

// TestPathReason: why the tasks' calls took their paths, from why AF_XDP
// is not used or from what the dual connections measured per size class.
func TestPathReason(t *testing.T) {
	const us = time.Microsecond
	onTCP := afxdprpc.PathStats{Policy: "auto", Classes: []afxdprpc.ClassChoice{
		{Above: 0, AtMost: 64, Calls: 900, TCPCost: 40 * us, AFXDPCost: 60 * us, Margin: 0.45, CPURatio: 2},
		// A class of a few calls is listed, its measurements left out.
		{Above: 4 << 10, AtMost: 8 << 10, Calls: 5, TCPCost: 100 * us, AFXDPCost: 10 * us, Margin: 0.9, CPURatio: 1},
		{Above: 16 << 10, AtMost: 32 << 10, Calls: 100, TCPCost: 100 * us, AFXDPCost: 300 * us, Margin: 0.36, CPURatio: 2.5},
	}}
	mixed := afxdprpc.PathStats{Policy: "auto", Classes: []afxdprpc.ClassChoice{
		{Above: 0, AtMost: 64, Calls: 900, AFXDP: true, TCPCost: 40 * us, AFXDPCost: 10 * us, Margin: 0.8},
		{Above: 64, AtMost: 128, Calls: 900, AFXDP: true, TCPCost: 40 * us, AFXDPCost: 20 * us, Margin: 0.8},
		{Above: 16 << 10, AtMost: 32 << 10, Calls: 100, TCPCost: 100 * us, AFXDPCost: 300 * us, Margin: 0.4},
	}}
	for _, tt := range []struct {
		name     string
		fallback string
		stats    []afxdprpc.PathStats
		want     string
	}{
		{"not root", "AF_XDP needs root (CAP_NET_ADMIN and CAP_BPF)", nil, "AF_XDP unavailable: AF_XDP needs root (CAP_NET_ADMIN and CAP_BPF)"},
		{"off", "--afxdp off", nil, "AF_XDP off (--afxdp off)"},
		{"fixed", "", []afxdprpc.PathStats{{Policy: "below 64KiB"}}, "--afxdp_path below 64KiB: the tasks' calls to each other take the path it names, unmeasured"},
		{"tcp faster", "", []afxdprpc.PathStats{onTCP, onTCP},
			"auto: TCP measured faster for every size of the calls (≤32KiB) on this machine (AF_XDP took 1.50–3.00× TCP's time per call and used 2.00–2.50× TCP's CPU per call; it is taken below 0.36×)"},
		{"mixed", "", []afxdprpc.PathStats{mixed},
			"auto: AF_XDP measured faster for calls of size≤128B on this machine (AF_XDP took 0.25–0.50× TCP's time per call and its CPU per call not measured yet; it is kept below 1.25×); " +
				"TCP measured faster for calls of 16KiB<size≤32KiB on this machine (AF_XDP took 3.00× TCP's time per call and its CPU per call not measured yet; it is taken below 0.40×)"},
	} {
		if got := pathReason(tt.fallback, tt.stats); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}
