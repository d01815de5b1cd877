package tasks

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
)

// TestDualsLogToStartsLogger: the dual connections of a task log to the
// logger given to Start, not to stderr, and only their warnings and
// errors: their choice of path stays out of the output while it works,
// attributes and groups kept.
func TestDualsLogToStartsLogger(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := &Server{peerDuals: newPeerDuals(&tcp.Transport{}, nil, afxdprpc.PathPolicy{})}
	spec, err := cluster.NewSpec(map[string][]string{"ps": {"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	peers := NewPeers(Layout{Protocol: cluster.ProtocolGRPCSeastar, Cluster: spec})
	defer peers.Close()
	s.startDuals(peers, logger)
	log := s.peerDuals.logger.With("peer", "127.0.0.1:1").WithGroup("path")
	log.Info("starwire: calls over AF_XDP")
	log.Warn("starwire: packet path failed, calls back on tcp", "err", "reset")
	out := buf.String()
	if strings.Contains(out, "calls over AF_XDP") {
		t.Errorf("an info line of the duals was logged:\n%s", out)
	}
	if !strings.Contains(out, `level=WARN msg="starwire: packet path failed, calls back on tcp" peer=127.0.0.1:1 path.err=reset`) {
		t.Errorf("the duals' warning is not in the logger's output, with its attributes:\n%s", out)
	}
}
