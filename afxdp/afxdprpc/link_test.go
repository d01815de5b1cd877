package afxdprpc_test

// rpc over a packet link: real rpc clients and servers on afxdp endpoints
// over memory links and kernel UDP sockets, loopback and between network
// namespaces, every answer checked.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/afxdptest"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/wire"
)

var (
	methodEcho = rpc.NewMethod("afxdp.test.Echo")
	methodFail = rpc.NewMethod("afxdp.test.Fail")
	methodSink = rpc.NewMethod("afxdp.test.Sink")
)

// The two ends of the tests' memory links.
var (
	memA = netip.MustParseAddrPort("198.18.0.1:7000")
	memB = netip.MustParseAddrPort("198.18.0.2:7000")
)

// echoHandler answers with the request's metadata and tensors, which stay
// valid until the response is sent.
func echoHandler(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
	resp.Meta = append(resp.Meta, req.Meta...)
	for _, t := range req.Tensors {
		resp.Tensors = append(resp.Tensors, wire.Tensor{DType: t.DType, Shape: t.Shape, Data: t.Data})
	}
	return nil
}

// serveRPC runs an rpc.Server on srv and returns a client of it dialing
// from cli; both stop at the end of the test.
func serveRPC(t testing.TB, srv, cli afxdprpc.Network) *rpc.Client {
	t.Helper()
	s := rpc.NewServer()
	s.Register(methodEcho, echoHandler, rpc.HandlerOptions{Inline: true})
	s.Register(methodSink, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error { return nil }, rpc.HandlerOptions{Inline: true})
	s.Register(methodFail, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		return rpc.Errorf(wire.NotFound, "nothing called %q", req.Meta)
	}, rpc.HandlerOptions{})
	l, err := afxdprpc.Transport(srv).Listen("")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	c := rpc.NewClient(srv.Addr().String(), rpc.ClientOptions{Transport: afxdprpc.Transport(cli)})
	t.Cleanup(func() {
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return c
}

// checkRPC makes sequential and concurrent calls, an error call and a call
// carrying a tensor of size bytes (4 MiB at most with -short or the race
// detector), checking every answer.
func checkRPC(t testing.TB, c *rpc.Client, calls, size int) {
	t.Helper()
	if (testing.Short() || raceOn) && size > 4<<20 {
		size = 4 << 20 // see raceOn
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var reply rpc.Reply
	for i := range calls {
		meta := fmt.Appendf(nil, "call %d", i)
		if err := c.Call(ctx, methodEcho, &rpc.Request{Meta: meta}, &reply); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !bytes.Equal(reply.Meta, meta) {
			t.Fatalf("call %d answered %q", i, reply.Meta)
		}
	}
	reply.Release()
	var wg sync.WaitGroup
	errc := make(chan error, 32)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r rpc.Reply
			defer r.Release()
			for i := range calls / 32 {
				meta := fmt.Appendf(nil, "g%d-%d", g, i)
				if err := c.Call(ctx, methodEcho, &rpc.Request{Meta: meta}, &r); err != nil {
					errc <- err
					return
				}
				if !bytes.Equal(r.Meta, meta) {
					errc <- fmt.Errorf("%s answered %q", meta, r.Meta)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	err := c.Call(ctx, methodFail, &rpc.Request{Meta: []byte("x")}, &reply)
	if !errors.Is(err, rpc.ErrNotFound) {
		t.Fatalf("failing call returned %v", err)
	}
	if size > 0 {
		data := pattern(size, 9)
		req := &rpc.Request{Meta: []byte("big"), Tensors: []wire.Tensor{{DType: wire.DTInt8, Shape: []int64{int64(size)}, Data: data}}}
		// The answer lands in memory the caller chose.
		dst := make([]byte, size)
		reply.Alloc = func(in *wire.Inbound) error {
			in.Tensors[0].Data = dst
			return nil
		}
		start := time.Now()
		if err := c.Call(ctx, methodEcho, req, &reply); err != nil {
			t.Fatalf("tensor call: %v", err)
		}
		t.Logf("%d MiB echoed in %v", size>>20, time.Since(start))
		if len(reply.Tensors) != 1 || &reply.Tensors[0].Data[0] != &dst[0] || !bytes.Equal(dst, data) {
			t.Fatal("echoed tensor differs or did not land where Alloc said")
		}
		reply.Release()
	}
}

// envOptions are the options of reactor index of a task of job, as the
// environment (rpc/cluster) asks, as the command makes them.
func envOptions(job string, index int) afxdp.Options {
	busy, set := cluster.PacketPolling(job)
	return afxdp.TaskOptions(busy, set, cluster.PinPacketReactors(job), index)
}

func listenUDP(t testing.TB, addr string) *link.UDPLink {
	t.Helper()
	l, err := link.ListenUDP(addr, link.UDPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// udpIn opens a UDP link on port (0: any) of e's address, inside e's
// namespace.
func udpIn(tb testing.TB, e *netns.End, port int, opts link.UDPOptions) *link.UDPLink {
	tb.Helper()
	var l *link.UDPLink
	addr := netip.AddrPortFrom(e.Addr, uint16(port)).String()
	if err := e.Do(func() (err error) { l, err = link.ListenUDP(addr, opts); return err }); err != nil {
		tb.Fatal(err)
	}
	return l
}

// udpPair returns UDP links in the two namespaces of p, the server's on
// port 7600.
func udpPair(t testing.TB, p *netns.Pair) (srv, cli *link.UDPLink) {
	t.Helper()
	return udpIn(t, p.B, 7600, link.UDPOptions{}), udpIn(t, p.A, 0, link.UDPOptions{})
}

// TestRPCOverMemLink runs real rpc calls, 1000 sequential and 1000 from 32
// goroutines, then a 64 MiB tensor echo, over a link that loses 5%,
// reorders 25% and duplicates 1% of the packets each way. Every answer is
// checked, so a call answered twice, lost or corrupted fails the test.
func TestRPCOverMemLink(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	la, lb := link.MemPair(memA, memB, link.MemOptions{Loss: 0.05, Reorder: 0.25, Duplicate: 0.01, Seed: 7})
	srv, cli := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	checkRPC(t, serveRPC(t, srv, cli), 1000, 64<<20)
	if la.Dropped.Load() == 0 || la.Reordered.Load() == 0 || la.Duplicated.Load() == 0 {
		t.Fatal("the link impaired nothing")
	}
}

// TestRPCBlockingReceiver runs the calls with frames delivered from each
// Conn's Receive goroutine instead of the reactor.
func TestRPCBlockingReceiver(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	la, lb := link.MemPair(memA, memB, link.MemOptions{Loss: 0.02, Reorder: 0.1, Duplicate: 0.01, Seed: 5})
	opts := afxdp.Options{Ticket: testTicket, BlockingReceiver: true, Deliveries: 8}
	srv := afxdp.NewEndpoint(lb, opts)
	opts.Backlog = -1
	cli := afxdp.NewEndpoint(la, opts)
	t.Cleanup(func() { srv.Close(); cli.Close() })
	checkRPC(t, serveRPC(t, srv, cli), 500, 8<<20)
}

// TestRPCPollingModes runs calls with a busy-polling, pinned server reactor
// and a client reactor that spins before sleeping, as the *_ENABLE_POLLING
// and *_DISABLE_PIN_CORES variables ask.
func TestRPCPollingModes(t *testing.T) {
	t.Setenv(cluster.EnvPSPolling, "true")
	t.Setenv(cluster.EnvPSDisablePin, "false")
	so := envOptions("ps", 0)
	if !so.Busy || !so.Pin || so.CPU != 0 {
		t.Fatalf("options from the environment: %+v", so)
	}
	if co := envOptions("worker", 1); co.Busy || co.Pin || co.Spin != 0 {
		t.Fatalf("worker options follow the ps variables: %+v", co)
	}
	t.Setenv(cluster.EnvWorkerPolling, "False")
	if co := envOptions("worker", 1); co.Busy || co.Spin >= 0 || co.FrameSpin >= 0 {
		t.Fatalf("WORKER_ENABLE_POLLING=False still polls: %+v", co)
	}
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	srv := afxdp.NewEndpoint(lb, withTicket(so))
	cli := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket, Backlog: -1, Spin: 100 * time.Microsecond})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	checkRPC(t, serveRPC(t, srv, cli), 200, 1<<20)
}

func TestRPCOverUDPNamespacesClean(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	p := netnstest.NewForTest(t, netns.Options{})
	ls, lc := udpPair(t, p)
	srv, cli := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	checkRPC(t, serveRPC(t, srv, cli), 1000, 64<<20)
}

func TestRPCOverUDPLoopback(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	srv := afxdp.NewEndpoint(listenUDP(t, "127.0.0.1:0"), afxdp.Options{Ticket: testTicket})
	cli := afxdp.NewEndpoint(listenUDP(t, "127.0.0.1:0"), afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	checkRPC(t, serveRPC(t, srv, cli), 1000, 16<<20)
}

// TestRPCOverUDPNamespaces runs calls between two namespaces over a veth
// whose kernel path loses, reorders and duplicates packets (netem).
func TestRPCOverUDPNamespaces(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	netnstest.Require(t, netnstest.Netem)
	p := netnstest.NewForTest(t, netns.Options{})
	for _, e := range []*netns.End{p.A, p.B} {
		if err := e.Netem("loss", "5%", "delay", "1ms", "reorder", "25%", "duplicate", "1%"); err != nil {
			t.Fatal(err)
		}
	}
	ls, lc := udpPair(t, p)
	srv, cli := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	checkRPC(t, serveRPC(t, srv, cli), 1000, 64<<20)
	t.Logf("client %+v server %+v", cli.Stats(), srv.Stats())
}

// TestRPCOverUDPImpaired is the namespace test with faults injected on both
// receive sides, for kernels without netem.
func TestRPCOverUDPImpaired(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	p := netnstest.NewForTest(t, netns.Options{})
	ls, lc := udpPair(t, p)
	imp := afxdptest.Impairment{Loss: 0.05, Reorder: 0.25, Duplicate: 0.01, Seed: 3}
	is, ic := afxdptest.Impair(ls, imp), afxdptest.Impair(lc, imp)
	srv, cli := afxdp.NewEndpoint(is, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(ic, afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	checkRPC(t, serveRPC(t, srv, cli), 1000, 64<<20)
	srv.Close()
	cli.Close()
	if is.Dropped == 0 || is.Reordered == 0 || is.Duplicated == 0 {
		t.Fatalf("nothing impaired: %+v", is)
	}
}

// TestServerRestart closes the server endpoint and starts a new one on the
// same port: the client's session is reset or times out, and the rpc
// client redials and carries on.
func TestServerRestart(t *testing.T) {
	ls := listenUDP(t, "127.0.0.1:0")
	addr := ls.LocalAddr().String()
	srv := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket})
	cli := afxdp.NewEndpoint(listenUDP(t, "127.0.0.1:0"), afxdp.Options{Ticket: testTicket, Backlog: -1, DeadAfter: time.Second})
	t.Cleanup(func() { cli.Close() })
	c := serveRPC(t, srv, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var r rpc.Reply
	if err := c.Call(ctx, methodEcho, &rpc.Request{Meta: []byte("before")}, &r); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	srv2 := afxdp.NewEndpoint(listenUDP(t, addr), afxdp.Options{Ticket: testTicket})
	t.Cleanup(func() { srv2.Close() })
	s := rpc.NewServer()
	s.Register(methodEcho, echoHandler, rpc.HandlerOptions{Inline: true})
	l, err := afxdprpc.Transport(srv2).Listen("")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	// The first call may fail with the old session; the next redials.
	var last error
	for range 50 {
		if last = c.Call(ctx, methodEcho, &rpc.Request{Meta: []byte("after")}, &r); last == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // paces the redials while the restarted server's session opens
	}
	if last != nil || string(r.Meta) != "after" {
		t.Fatalf("after the restart: %v, %q", last, r.Meta)
	}
	r.Release()
}
