package tasks

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/starwire/starwire/rpc/cluster"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestLocalClusterAnswers starts a local cluster over each protocol and
// transport and checks that every task answers GetStatus through Peers,
// that Peers caches, and that Close stops the tasks.
func TestLocalClusterAnswers(t *testing.T) {
	for _, tc := range []struct {
		protocol cluster.Protocol
		net      Net
	}{
		{cluster.ProtocolGRPCSeastar, TCPNet{}},
		{cluster.ProtocolGRPCSeastar, UDPNet{}},
		{cluster.ProtocolGRPC, nil},
	} {
		name := string(tc.protocol)
		if tc.net != nil {
			name += "/" + tc.net.Name()
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l, err := StartLocal(LocalOptions{PS: 1, Workers: 2, Protocol: tc.protocol, Net: tc.net, Dir: t.TempDir(), Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if got := l.Layout.Cluster.Len(); got != 3 {
				t.Fatalf("cluster of %d tasks, want 3", got)
			}
			if tc.protocol.UsesStar() && l.EndpointMapPath == "" {
				t.Error("no endpoint map written for grpc+seastar")
			}
			layout := l.Layout
			if tc.net != nil {
				tr, c, err := tc.net.Dialer()
				if err != nil {
					t.Fatal(err)
				}
				if c != nil {
					defer c.Close()
				}
				layout.Transport = tr
			}
			peers := NewPeers(layout)
			defer peers.Close()
			for _, s := range l.Servers {
				c, err := peers.Caller(s.Task())
				if err != nil {
					t.Fatal(err)
				}
				if again, _ := peers.Caller(s.Task()); again != c {
					t.Errorf("Caller(%s) made a second caller", s.Task())
				}
				st, err := c.GetStatus(ctx)
				if err != nil {
					t.Fatalf("GetStatus of %s: %v", s.Task(), err)
				}
				if got := st.GetDeviceAttributes()[0].GetName(); got != s.Task()+"/device:CPU:0" {
					t.Errorf("%s reports device %q", s.Task(), got)
				}
			}
			if st := peers.Stats(); st.Calls != 3 {
				t.Errorf("peers counted %d calls, want 3", st.Calls)
			}
			if _, err := peers.Caller("/job:ps/replica:0/task:7"); !errors.Is(err, cluster.ErrNoTask) {
				t.Errorf("Caller of a task not in the cluster: %v, want ErrNoTask", err)
			}
		})
	}
}

func TestListenPortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, err = Listen("ps", 0, busy.Addr().String(), "", false, nil)
	if !errors.Is(err, ErrAddrInUse) {
		t.Errorf("Listen on a busy port: %v, want ErrAddrInUse", err)
	}
	s, err := Listen("ps", 0, "127.0.0.1:0", busy.Addr().String(), true, TCPNet{})
	if !errors.Is(err, ErrAddrInUse) {
		t.Errorf("Listen with a busy starwire port: %v, want ErrAddrInUse", err)
		if s != nil {
			s.Close()
		}
	}
}

func TestLayoutCheck(t *testing.T) {
	spec, err := cluster.ParseSpec("ps=127.0.0.1:1000;worker=127.0.0.1:1001")
	if err != nil {
		t.Fatal(err)
	}
	var empty Layout
	if err := empty.Check(); err == nil {
		t.Error("an empty layout passed Check")
	}
	l := Layout{Protocol: cluster.ProtocolGRPCSeastar, Cluster: spec}
	if err := l.Check(); !errors.Is(err, cluster.ErrNoStarAddr) {
		t.Errorf("grpc+seastar without endpoints: %v, want ErrNoStarAddr", err)
	}
	l.Protocol = cluster.ProtocolGRPC
	if err := l.Check(); err != nil {
		t.Errorf("grpc layout: %v", err)
	}
}

// TestStartLocalFailureReturnsError: a cluster that cannot start returns
// why, having stopped what it started (it used to panic closing the nil
// cluster its deferred cleanup saw).
func TestStartLocalFailureReturnsError(t *testing.T) {
	l, err := StartLocal(LocalOptions{PS: 1, Workers: 1, Protocol: cluster.ProtocolGRPC, AFXDP: true, Dir: t.TempDir(), Logger: quiet})
	if err == nil || l != nil {
		t.Fatalf("StartLocal = %v, %v; want an error", l, err)
	}
	if !strings.Contains(err.Error(), "AF_XDP carries the starwire worker service") {
		t.Errorf("error %q does not say why", err)
	}
}
