package main

import (
	"errors"
	"testing"

	"github.com/starwire/starwire/cmd/starwire/internal/tasks"
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
