package afxdprpc_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

var echo = rpc.NewMethod("afxdprpc.test.Echo")

// logBuffer collects log lines for assertions.
type logBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed, and replaced, by every Write
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.written != nil {
		close(l.written)
		l.written = nil
	}
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitLogged waits up to within for a line containing s, woken by each
// write rather than polling: a line a goroutine logs after the state the
// test saw changed may come a while later on a loaded machine.
func (l *logBuffer) waitLogged(t *testing.T, s string, within time.Duration) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		l.mu.Lock()
		found := strings.Contains(l.b.String(), s)
		if l.written == nil {
			l.written = make(chan struct{})
		}
		written := l.written
		l.mu.Unlock()
		if found {
			return
		}
		select {
		case <-written:
		case <-timer.C:
			t.Fatalf("%q not logged within %v:\n%s", s, within, l.String())
		}
	}
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func udpEndpoint(t *testing.T, addr string, opts afxdp.Options) *afxdp.Endpoint {
	t.Helper()
	link, err := link.ListenUDP(addr, link.UDPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep := afxdp.NewEndpoint(link, opts)
	t.Cleanup(func() { ep.Close() })
	return ep
}

// frameCounter counts the calls a server receives over packet sessions.
type frameCounter struct{ packet atomic.Int64 }

// count is a server interceptor counting the calls that came over a
// packet session, whose peer is a UDP address. It counts in the server's
// handlers rather than in a wrapper of its connections, which would have
// to forward what the core asks of them.
func (n *frameCounter) count(ctx context.Context, info *rpc.ServerInfo, req *wire.Inbound, resp *rpc.Response, h rpc.ServerHandler) error {
	if _, udp := info.Peer.(*net.UDPAddr); udp {
		n.packet.Add(1)
	}
	return h(ctx, info, req, resp)
}

var packetFrames frameCounter

// serveDual serves an echo over a Dual transport on addr and returns the
// TCP address clients dial. Calls that arrive over packet sessions are
// counted in packetFrames.
func serveDual(t *testing.T, tr rpc.Transport, addr string) string {
	t.Helper()
	tl, err := tr.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	s := rpc.NewServer()
	s.Interceptors = []rpc.ServerInterceptor{packetFrames.count}
	s.Register(echo, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	go s.Serve(tl)
	t.Cleanup(func() { s.Close() })
	return tl.Addr().String()
}

func call(t *testing.T, c *rpc.Client, i int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	want := fmt.Sprintf("call %d", i)
	var r rpc.Reply
	if err := c.Call(ctx, echo, &rpc.Request{Meta: []byte(want)}, &r); err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	if string(r.Meta) != want {
		t.Fatalf("%s: answer %q", want, r.Meta)
	}
	r.Release()
}

// waitPath calls until the client's calls take path, or fails.
func waitPath(t *testing.T, c *rpc.Client, path netpath.Path) {
	t.Helper()
	i := 0
	testwait.Eventually(t, 10*time.Second, func() bool {
		if c.Stats().Path == path {
			return true
		}
		call(t, c, i)
		i++
		return false
	}, "calls to take path %q (on %q)", path, c.Stats().Path)
}

func TestDualMovesCallsToPacketPath(t *testing.T) {
	srvEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket})
	cliEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket, Backlog: -1})
	var logs logBuffer
	// Every call, as the policy says (auto mode sends a few over TCP to
	// time it: see choice_test.go).
	opts := afxdprpc.DualOptions{Path: netpath.UDP, AllowUDP: true, Logger: logs.logger(), Policy: afxdprpc.PathPolicy{Mode: afxdprpc.PathAFXDP}}
	addr := serveDual(t, afxdprpc.Dual(&tcp.Transport{}, srvEP, opts), "127.0.0.1:0")
	c := rpc.NewClient(addr, rpc.ClientOptions{Transport: afxdprpc.Dual(&tcp.Transport{}, cliEP, opts)})
	defer c.Close()
	waitPath(t, c, netpath.UDP)
	before := packetFrames.packet.Load()
	for i := range 50 {
		call(t, c, i)
	}
	if n := packetFrames.packet.Load() - before; n < 50 {
		t.Fatalf("%d of 50 calls reached the server over the packet path", n)
	}
	if n := strings.Count(logs.String(), "calls move to the packet path"); n != 1 {
		t.Fatalf("%d path lines, want 1:\n%s", n, logs.String())
	}
}

func TestDualStaysOnTCP(t *testing.T) {
	cliEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket, Backlog: -1})
	tests := []struct {
		name   string
		server func(t *testing.T) rpc.Transport
		client afxdprpc.DualOptions
	}{
		{"server without packet endpoint", func(t *testing.T) rpc.Transport {
			return afxdprpc.Dual(&tcp.Transport{}, nil, afxdprpc.DualOptions{})
		}, afxdprpc.DualOptions{Path: netpath.UDP, AllowUDP: true}},
		{"kernel UDP is not worth it", func(t *testing.T) rpc.Transport {
			return afxdprpc.Dual(&tcp.Transport{}, udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket}), afxdprpc.DualOptions{Path: netpath.UDP})
		}, afxdprpc.DualOptions{Path: netpath.UDP}},
		{"packet endpoint unreachable", func(t *testing.T) rpc.Transport {
			ep := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket})
			ep.Close() // advertised, but nobody answers there
			return afxdprpc.Dual(&tcp.Transport{}, ep, afxdprpc.DualOptions{Path: netpath.AFXDP})
		}, afxdprpc.DualOptions{Path: netpath.AFXDP, OpenTimeout: 200 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs logBuffer
			tt.client.Logger = logs.logger()
			addr := serveDual(t, tt.server(t), "127.0.0.1:0")
			c := rpc.NewClient(addr, rpc.ClientOptions{Transport: afxdprpc.Dual(&tcp.Transport{}, cliEP, tt.client)})
			defer c.Close()
			i := 0
			testwait.Eventually(t, 10*time.Second, func() bool {
				if strings.Contains(logs.String(), "calls stay on tcp") {
					return true
				}
				call(t, c, i)
				i++
				return false
			}, "a decision logged:\n%s", &logs)
			call(t, c, -1)
			if p := c.Stats().Path; p != netpath.TCP {
				t.Fatalf("path %q, want tcp", p)
			}
		})
	}
}

func TestDualFallsBackToTCPWhenPacketPathFails(t *testing.T) {
	srvEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket})
	cliEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket, Backlog: -1, DeadAfter: 300 * time.Millisecond})
	var logs logBuffer
	opts := afxdprpc.DualOptions{Path: netpath.UDP, AllowUDP: true, Logger: logs.logger()}
	addr := serveDual(t, afxdprpc.Dual(&tcp.Transport{}, srvEP, opts), "127.0.0.1:0")
	c := rpc.NewClient(addr, rpc.ClientOptions{Transport: afxdprpc.Dual(&tcp.Transport{}, cliEP, opts)})
	defer c.Close()
	waitPath(t, c, netpath.UDP)
	srvEP.Close()
	// Calls in flight on the dead path may fail; after that TCP carries them.
	if !testwait.Until(10*time.Second, func() bool {
		var r rpc.Reply
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.Call(ctx, echo, &rpc.Request{Meta: []byte("x")}, &r)
		cancel()
		r.Release()
		return c.Stats().Path == netpath.TCP
	}) {
		t.Fatalf("still on %q:\n%s", c.Stats().Path, logs.String())
	}
	for i := range 20 {
		call(t, c, i)
	}
	// The connection leaves the packet path before it logs why, on the
	// goroutine that found it failed, which may not have run yet.
	logs.waitLogged(t, "calls back on tcp", 10*time.Second)
}

// Between two network namespaces over veth, both ends on AF_XDP: calls move
// to the AF_XDP path by themselves.
func TestDualOverAFXDP(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	const port = 7710
	srvG, cliG := openXDPIn(t, p.B, port), openXDPIn(t, p.A, port)
	opts := afxdprpc.DualOptions{Path: netpath.AFXDP, Policy: afxdprpc.PathPolicy{Mode: afxdprpc.PathAFXDP}}
	var addr string
	if err := p.B.Do(func() error {
		addr = serveDual(t, afxdprpc.Dual(&tcp.Transport{}, srvG, opts), p.B.Addr.String()+":0")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c := rpc.NewClient(addr, rpc.ClientOptions{Transport: afxdprpc.Dual(&tcp.Transport{}, cliG, opts)})
	defer c.Close()
	// The TCP connection is dialled inside A's namespace.
	if err := p.A.Do(func() error { waitPath(t, c, netpath.AFXDP); return nil }); err != nil {
		t.Fatal(err)
	}
	before := packetFrames.packet.Load()
	for i := range 100 {
		call(t, c, i)
	}
	if n := packetFrames.packet.Load() - before; n < 100 {
		t.Fatalf("%d of 100 calls reached the server over AF_XDP", n)
	}
}

// TestDualTotalsKeepClosedConnections: Stats lists the open connections
// only, Totals every connection the transport dialed: what a closed one
// carried is still counted, on the path it took.
func TestDualTotalsKeepClosedConnections(t *testing.T) {
	srvEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket})
	cliEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket, Backlog: -1})
	opts := afxdprpc.DualOptions{Path: netpath.UDP, AllowUDP: true, Logger: (&logBuffer{}).logger(), Policy: afxdprpc.PathPolicy{Mode: afxdprpc.PathAFXDP}}
	addr := serveDual(t, afxdprpc.Dual(&tcp.Transport{}, srvEP, opts), "127.0.0.1:0")
	tr := afxdprpc.Dual(&tcp.Transport{}, cliEP, opts)
	var bypass, tcp uint64
	for round := range 2 {
		c := rpc.NewClient(addr, rpc.ClientOptions{Transport: tr})
		waitPath(t, c, netpath.UDP)
		for i := range 20 {
			call(t, c, i)
		}
		st := tr.Stats()
		if len(st) != 1 {
			t.Fatalf("round %d: %d open connections in Stats, want 1", round, len(st))
		}
		bypass, tcp = bypass+st[0].AFXDPCalls, tcp+st[0].TCPCalls
		c.Close()
		testwait.Eventually(t, 10*time.Second, func() bool { return len(tr.Stats()) == 0 }, "round %d: a closed connection to leave Stats", round)
	}
	got := tr.Totals()
	if got.AFXDPCalls != bypass || got.TCPCalls != tcp || bypass < 40 {
		t.Fatalf("Totals: %d calls over the bypass, %d over TCP; the connections counted %d and %d (at least 40 over the bypass)",
			got.AFXDPCalls, got.TCPCalls, bypass, tcp)
	}
	if got.Policy != "afxdp" {
		t.Fatalf("Totals' policy %q, want afxdp", got.Policy)
	}
}
