package afxdprpc_test

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// TestRecvBudgetClosesWindow: a server out of room for requests (its
// calls in progress hold RecvBudget) closes the session's window, as a
// TCP reader stops reading, instead of taking the next request: of 8
// calls of 1 MiB requests against a RecvBudget of 2 MiB, with handlers
// that wait, two run, the session then leaves the third request's first
// packet untaken (Stats.Deferred), and once the handlers go on every call
// is answered, none refused, never more than two at once. It holds on a
// packet transport and on the dual transport's packet half alike: the
// dual listener hands the server its packet sessions as they are, so the
// server's room check reaches them.
func TestRecvBudgetClosesWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		// open returns the server's listener, a client of it whose calls
		// take the packet path, and the server endpoint's Stats.
		open func(t *testing.T, s *rpc.Server) (*rpc.Client, func() afxdp.Stats)
	}{
		{"packet", openPacketBudget},
		{"dual", openDualBudget},
	} {
		t.Run(tc.name, func(t *testing.T) { checkRecvBudgetClosesWindow(t, tc.open) })
	}
}

// openPacketBudget serves s over a packet transport on a MemLink pair.
func openPacketBudget(t *testing.T, s *rpc.Server) (*rpc.Client, func() afxdp.Stats) {
	la, lb := link.MemPair(netip.MustParseAddrPort("198.18.0.1:7000"), netip.MustParseAddrPort("198.18.0.2:7000"), link.MemOptions{})
	ea := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket})
	eb := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket})
	t.Cleanup(func() { ea.Close(); eb.Close() })
	l, err := afxdprpc.Transport(eb).Listen("")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	c := rpc.NewClient(eb.Addr().String(), rpc.ClientOptions{Transport: afxdprpc.Transport(ea)})
	t.Cleanup(func() { c.Close() })
	return c, eb.Stats
}

// openDualBudget serves s over the dual transport on loopback, its calls
// moved to the packet path before it returns.
func openDualBudget(t *testing.T, s *rpc.Server) (*rpc.Client, func() afxdp.Stats) {
	srvEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket})
	cliEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket, Backlog: -1})
	opts := afxdprpc.DualOptions{Path: netpath.UDP, AllowUDP: true, Policy: afxdprpc.PathPolicy{Mode: afxdprpc.PathAFXDP}}
	l, err := afxdprpc.Dual(&tcp.Transport{}, srvEP, opts).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	c := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: afxdprpc.Dual(&tcp.Transport{}, cliEP, opts)})
	t.Cleanup(func() { c.Close() })
	waitPath(t, c, netpath.UDP)
	return c, srvEP.Stats
}

func checkRecvBudgetClosesWindow(t *testing.T, open func(*testing.T, *rpc.Server) (*rpc.Client, func() afxdp.Stats)) {
	const calls, request = 8, 1 << 20
	var running, most atomic.Int32
	gate := make(chan struct{})
	s := rpc.NewServer()
	s.RecvBudget = 2 * request
	m := rpc.NewMethod("afxdp.test.HoldRequest")
	s.Register(m, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		n := running.Add(1)
		for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
		}
		defer running.Add(-1)
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, rpc.HandlerOptions{})
	s.Register(echo, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	c, stats := open(t, s)
	t.Cleanup(func() { s.Close() }) // before open's cleanups: the listeners stop first
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	data := make([]byte, request)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			var reply rpc.Reply
			req := &rpc.Request{Meta: []byte("x"), Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{request}, Data: data}}}
			errs[i] = c.Call(ctx, m, req, &reply)
			reply.Release()
		})
	}
	testwait.For(t, 30*time.Second, stats, func(st afxdp.Stats) bool { return st.Deferred > 0 },
		"the server's session to leave a request untaken for lack of room")
	if n := running.Load(); n > 2 {
		t.Errorf("%d handlers hold 1 MiB requests against a RecvBudget of 2 MiB", n)
	}
	close(gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v (code %v)", i, err, rpc.CodeOf(err))
		}
	}
	if n := most.Load(); n > 2 {
		t.Errorf("%d handlers ran at once, holding more than RecvBudget", n)
	}
}
