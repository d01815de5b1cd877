package main

import (
	"errors"
	"testing"

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
