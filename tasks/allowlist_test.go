package tasks

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/metrics"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/xdp"
)

// TestAllowlistFromCluster serves a task over AF_XDP on one end of a veth
// pair; the other end's namespace holds a cluster peer's address and a
// stranger's. The stranger's datagrams to starwire's port are dropped in
// XDP and counted, in the program and in the metrics, while the peer's
// reach the socket; when the cluster changes so that the stranger is a
// task and the peer is not, the verdicts follow.
func TestAllowlistFromCluster(t *testing.T) {
	const port = 7799
	pair := netnstest.NewForTest(t, netns.Options{})
	peer := pair.A.Addr
	stranger := pair.B.Addr.Next()
	err := pair.A.Do(func() error {
		l, err := netlink.LinkByName(pair.A.Link)
		if err != nil {
			return err
		}
		return netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: stranger.AsSlice(), Mask: net.CIDRMask(pair.A.Prefix.Bits(), 32)}})
	})
	if err != nil {
		t.Fatal(err)
	}

	s, err := Listen("ps", 0, "127.0.0.1:0", "127.0.0.1:0", true, TCPNet{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ep, err := s.addAFXDP(pair.B.Link, port, pair.B.Do)
	if err != nil {
		t.Fatal(err)
	}
	s.peerTr = afxdprpc.Transport(ep)
	s.Metrics = metrics.New()
	if err := s.Start(layoutWith(t, s, peer, port), quiet); err != nil {
		t.Fatal(err)
	}
	prog := s.xdpPrograms()[0]
	if got := s.allow.addrs(); len(got) != 2 || got[0] != peer || got[1] != pair.B.Addr {
		t.Fatalf("allowlist %v, want the peer %v and the task itself %v", got, peer, pair.B.Addr)
	}

	const n = 5
	before := counters(t, prog)
	send(t, pair.A, stranger, netip.AddrPortFrom(pair.B.Addr, port), n)
	send(t, pair.A, peer, netip.AddrPortFrom(pair.B.Addr, port), n)
	after := waitCounters(t, prog, func(c xdp.Counters) bool {
		return c.NotAllowed-before.NotAllowed >= n && c.Redirected-before.Redirected >= n
	})
	if got := after.NotAllowed - before.NotAllowed; got != n {
		t.Errorf("%d of the stranger's datagrams dropped, want %d", got, n)
	}
	if got := after.Redirected - before.Redirected; got != n {
		t.Errorf("%d of the peer's datagrams steered to the socket, want %d", got, n)
	}
	if got := notAllowedMetric(t, s.Metrics); got != n {
		t.Errorf("starwire_xdp_packets_total{verdict=\"not_allowed\"} = %v, want %d", got, n)
	}

	// The stranger becomes the task's peer; the old peer is gone.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.allow.update(ctx, layoutWith(t, s, stranger, port)); err != nil {
		t.Fatal(err)
	}
	before = after
	send(t, pair.A, peer, netip.AddrPortFrom(pair.B.Addr, port), n)
	send(t, pair.A, stranger, netip.AddrPortFrom(pair.B.Addr, port), n)
	after = waitCounters(t, prog, func(c xdp.Counters) bool {
		return c.NotAllowed-before.NotAllowed >= n && c.Redirected-before.Redirected >= n
	})
	if got := after.NotAllowed - before.NotAllowed; got != n {
		t.Errorf("after the change, %d of the old peer's datagrams dropped, want %d", got, n)
	}
}

// layoutWith is a cluster of the task at its AF_XDP address and a worker
// whose starwire address is worker.
func layoutWith(t *testing.T, s *Server, worker netip.Addr, port uint16) Layout {
	t.Helper()
	const workerGRPC = "198.18.255.254:2222"
	spec, err := cluster.NewSpec(map[string][]string{"ps": {s.GRPCAddr}, "worker": {workerGRPC}})
	if err != nil {
		t.Fatal(err)
	}
	em := cluster.NewEndpointMap("test")
	self := s.xdpEPs[0].(interface{ Addr() netip.AddrPort }).Addr()
	if err := em.Add(s.GRPCAddr, self.String()); err != nil {
		t.Fatal(err)
	}
	if err := em.Add(workerGRPC, netip.AddrPortFrom(worker, port).String()); err != nil {
		t.Fatal(err)
	}
	return Layout{Protocol: cluster.ProtocolGRPCSeastar, Cluster: spec, Endpoints: em}
}

// send sends n datagrams from a kernel UDP socket bound to from, in e's
// namespace, to to.
func send(t *testing.T, e *netns.End, from netip.Addr, to netip.AddrPort, n int) {
	t.Helper()
	err := e.Do(func() error {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(from, 0)))
		if err != nil {
			return err
		}
		defer c.Close()
		for range n {
			if _, err := c.WriteToUDPAddrPort([]byte("not a starwire packet"), to); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func counters(t *testing.T, p *xdp.Program) xdp.Counters {
	t.Helper()
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitCounters reads p's counters until done holds, for up to 5 seconds,
// and returns them.
func waitCounters(t *testing.T, p *xdp.Program, done func(xdp.Counters) bool) xdp.Counters {
	t.Helper()
	return testwait.For(t, 5*time.Second, func() xdp.Counters { return counters(t, p) }, done, "the datagrams counted")
}

// notAllowedMetric returns the not_allowed verdicts m exports.
func notAllowedMetric(t *testing.T, m *metrics.Metrics) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "starwire_xdp_packets_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "verdict" && l.GetValue() == "not_allowed" {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
