package afxdprpc_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/afxdptest"
	"github.com/starwire/starwire/internal/bufpool"
	"github.com/starwire/starwire/internal/linktest"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/xdp"
)

// The tests' AF_XDP links, on the port linktest steers.
var openXSK = linktest.OpenXSK

const xskPort = linktest.XSKPort

// xskEndpoints returns a server endpoint in B and a client endpoint in A,
// both over AF_XDP, closed (and checked to leave no XDP program) at the end.
func xskEndpoints(t testing.TB, p *netns.Pair, opts link.XSKOptions, wrap func(link.Link) link.Link) (srv, cli *afxdp.Endpoint, ls, lc *link.XSKLink) {
	t.Helper()
	ls, lc = openXSK(t, p.B, opts), openXSK(t, p.A, opts)
	var s, c link.Link = ls, lc
	if wrap != nil {
		s, c = wrap(s), wrap(c)
	}
	srv, cli = afxdp.NewEndpoint(s, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(c, afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() {
		srv.Close()
		cli.Close()
		for _, e := range []*netns.End{p.A, p.B} {
			if on, err := e.XDPAttached(); err != nil || on {
				t.Errorf("%s: XDP program still attached after close (%v)", e.Link, err)
			}
		}
		for _, l := range []*link.XSKLink{ls, lc} {
			if n := l.LostFrames(); n != 0 {
				t.Errorf("%d UMEM frames unaccounted for after close", n)
			}
		}
	})
	return srv, cli, ls, lc
}

// TestNothingLeaksAfterClose runs calls with tensors over AF_XDP with loss
// and reordering, so frames are in flight, held past gaps and resent, then
// closes everything: every pooled buffer comes back and every UMEM frame
// is accounted for (xskEndpoints checks the frames), and goleak in
// TestMain checks the goroutines.
func TestNothingLeaksAfterClose(t *testing.T) {
	live := bufpool.Live()
	t.Run("calls", func(t *testing.T) {
		p := netnstest.NewForTest(t, netns.Options{})
		imp := afxdptest.Impairment{Reorder: 0.1, Seed: 5}
		srv, cli, _, _ := xskEndpoints(t, p, link.XSKOptions{Loss: 0.05}, func(l link.Link) link.Link { return afxdptest.Impair(l, imp) })
		checkRPC(t, serveRPC(t, srv, cli), 200, 8<<20)
	})
	if n := bufpool.Live() - live; n != 0 {
		t.Fatalf("%d pooled buffers not returned after close", n)
	}
}

func TestRPCOverXSK(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	p := netnstest.NewForTest(t, netns.Options{})
	srv, cli, ls, _ := xskEndpoints(t, p, link.XSKOptions{}, nil)
	checkRPC(t, serveRPC(t, srv, cli), 1000, 64<<20)
	c, err := ls.Program().Counters()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server program %+v, client %+v server %+v", c, cli.Stats(), srv.Stats())
	if c.Redirected == 0 {
		t.Fatal("nothing went through AF_XDP")
	}
}

// TestRPCOverXSKImpaired runs the calls over AF_XDP with 5% of the steered
// packets dropped by the XDP program on both ends, and 25% reordered and 1%
// duplicated on receive. netem cannot do this: AF_XDP transmissions bypass
// the qdisc layer and XDP runs before it on receive.
func TestRPCOverXSKImpaired(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	p := netnstest.NewForTest(t, netns.Options{})
	imp := afxdptest.Impairment{Reorder: 0.25, Duplicate: 0.01, Seed: 11}
	var wrapped []*afxdptest.ImpairedLink
	srv, cli, ls, _ := xskEndpoints(t, p, link.XSKOptions{Loss: 0.05}, func(l link.Link) link.Link {
		w := afxdptest.Impair(l, imp)
		wrapped = append(wrapped, w)
		return w
	})
	checkRPC(t, serveRPC(t, srv, cli), 1000, 64<<20)
	c, err := ls.Program().Counters()
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	cli.Close()
	w := wrapped[0]
	t.Logf("server program %+v; receive faults: %d reordered, %d duplicated", c, w.Reordered, w.Duplicated)
	if c.Impaired == 0 || w.Reordered == 0 || w.Duplicated == 0 {
		t.Fatal("no faults were injected")
	}
}

// TestXSKWithKernelUDPPeer has an AF_XDP endpoint talk to a kernel UDP
// socket, in both roles: the frames it writes must be valid UDP for the
// kernel, and its neighbour resolution must find the peer.
func TestXSKWithKernelUDPPeer(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	t.Run("xsk server", func(t *testing.T) {
		ls := openXSK(t, p.B, link.XSKOptions{})
		lc := udpIn(t, p.A, 0, link.UDPOptions{})
		srv, cli := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1})
		t.Cleanup(func() { srv.Close(); cli.Close() })
		checkRPC(t, serveRPC(t, srv, cli), 200, 16<<20)
	})
	t.Run("xsk client", func(t *testing.T) {
		ls := udpIn(t, p.B, 7601, link.UDPOptions{})
		lc := openXSK(t, p.A, link.XSKOptions{Port: 7602})
		srv, cli := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1})
		t.Cleanup(func() { srv.Close(); cli.Close() })
		checkRPC(t, serveRPC(t, srv, cli), 200, 16<<20)
	})
}

// TestXSKWithNetemPeer impairs, with netem, what the kernel UDP peer of an
// AF_XDP endpoint sends (netem cannot touch AF_XDP transmissions).
func TestXSKWithNetemPeer(t *testing.T) {
	netnstest.Require(t, netnstest.Netem)
	p := netnstest.NewForTest(t, netns.Options{})
	if err := p.A.Netem("loss", "5%", "delay", "1ms", "reorder", "25%", "duplicate", "1%"); err != nil {
		t.Fatal(err)
	}
	ls := openXSK(t, p.B, link.XSKOptions{})
	lc := udpIn(t, p.A, 0, link.UDPOptions{})
	srv, cli := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	checkRPC(t, serveRPC(t, srv, cli), 1000, 64<<20)
}

// TestXSKQueues puts the server on a veth with two queues: it binds a
// socket to each, and the flows of many clients, which the kernel spreads
// over the queues, all get through.
func TestXSKQueues(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{Queues: 2})
	// In native mode veth runs XDP on the receive queue matching the
	// sender's transmit queue; the generic hook sees every packet on queue 0.
	ls := openXSK(t, p.B, link.XSKOptions{XDPMode: xdp.ModeNative})
	if len(ls.Queues()) != 2 {
		t.Fatalf("sockets on queues %v, want 2", ls.Queues())
	}
	srv := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket})
	t.Cleanup(func() { srv.Close() })
	for i := range 16 {
		lc := udpIn(t, p.A, 0, link.UDPOptions{})
		cli := afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1})
		t.Cleanup(func() { cli.Close() })
		c := serveRPC(t, srv, cli)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var r rpc.Reply
		for j := range 20 {
			if err := c.Call(ctx, methodEcho, &rpc.Request{Meta: []byte{byte(i), byte(j)}}, &r); err != nil {
				t.Fatalf("client %d call %d: %v", i, j, err)
			}
		}
		cancel()
		r.Release()
	}
	counts := ls.Received()
	c, _ := ls.Program().Counters()
	t.Logf("per queue %v, program %+v", counts, c)
	if counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("a queue received nothing: %v", counts)
	}
	if c.NoSocket != 0 {
		t.Fatalf("%d packets found no socket on their queue", c.NoSocket)
	}
}

// TestXSKPcap captures what an AF_XDP link sends and receives.
func TestXSKPcap(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	var capture bytes.Buffer
	ls := openXSK(t, p.B, link.XSKOptions{Pcap: &capture})
	lc := openXSK(t, p.A, link.XSKOptions{})
	srv, cli := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1})
	c := serveRPC(t, srv, cli)
	var r rpc.Reply
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 10 {
		if err := c.Call(ctx, methodEcho, &rpc.Request{Meta: []byte{byte(i)}}, &r); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	srv.Close()
	cli.Close()
	rd, err := pcapgo.NewReader(&capture)
	if err != nil {
		t.Fatal(err)
	}
	var in, out int
	for range 10000 {
		data, _, err := rd.ReadPacketData()
		if err != nil {
			break
		}
		pk := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		udp, _ := pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if udp == nil {
			t.Fatalf("captured a frame that is not UDP: %v", pk)
		}
		ip := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		switch {
		case ip.DstIP.Equal(p.B.Addr.AsSlice()) && int(udp.DstPort) == xskPort:
			in++
		case ip.SrcIP.Equal(p.B.Addr.AsSlice()) && int(udp.SrcPort) == xskPort:
			out++
		}
	}
	if in < 10 || out < 10 {
		t.Fatalf("captured %d received and %d sent packets", in, out)
	}
}

// TestXSKSizeAgreement joins ends with different datagram sizes on a
// 9000-byte MTU: a kernel UDP socket sending 8972-byte datagrams, and an
// AF_XDP link whose 2 KiB frames hold 1750. The session must use the
// smaller size in both directions.
func TestXSKSizeAgreement(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{MTU: 9000})
	ls := openXSK(t, p.B, link.XSKOptions{})
	if ls.MaxPayload() >= 8972 {
		t.Fatalf("AF_XDP link carries %d bytes", ls.MaxPayload())
	}
	lc := udpIn(t, p.A, 0, link.UDPOptions{MaxPayload: 8972})
	srv, cli := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1, DeadAfter: 2 * time.Second})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	checkRPC(t, serveRPC(t, srv, cli), 100, 4<<20)
	if ls.RxForeign.Load() != 0 {
		t.Fatalf("%d frames the AF_XDP link could not take", ls.RxForeign.Load())
	}
}

// TestXSKAllow checks that an allowlist lets the listed peer through and
// drops, in XDP, a peer not on it.
func TestXSKAllow(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	other := netip.MustParseAddr("198.18.255.254")
	ls := openXSK(t, p.B, link.XSKOptions{Allow: []netip.Addr{other}})
	lc := openXSK(t, p.A, link.XSKOptions{})
	srv, cli := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := cli.Dial(ctx, fmt.Sprintf("%s:%d", p.B.Addr, xskPort)); err == nil {
		t.Fatal("a peer off the allowlist opened a session")
	}
	c, err := ls.Program().Counters()
	if err != nil {
		t.Fatal(err)
	}
	if c.NotAllowed == 0 {
		t.Fatalf("nothing dropped by the allowlist: %+v", c)
	}
	if err := ls.Program().Allow(p.A.Addr); err != nil {
		t.Fatal(err)
	}
	checkRPC(t, serveRPC(t, srv, cli), 10, 0)
}
