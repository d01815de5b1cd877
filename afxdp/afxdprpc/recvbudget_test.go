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
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// TestRecvBudgetClosesWindow: a server out of room for requests (its
// calls in progress hold RecvBudget) closes the session's window, as a
// TCP reader stops reading, instead of taking the next request: of 8
// calls of 1 MiB requests against a RecvBudget of 2 MiB, with handlers
// that wait, two run, the session then leaves the third request's first
// packet untaken (Stats.Deferred), and once the handlers go on every call
// is answered, none refused, never more than two at once.
func TestRecvBudgetClosesWindow(t *testing.T) {
	const calls, request = 8, 1 << 20
	la, lb := link.MemPair(netip.MustParseAddrPort("198.18.0.1:7000"), netip.MustParseAddrPort("198.18.0.2:7000"), link.MemOptions{})
	ea := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket})
	eb := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket})
	t.Cleanup(func() { ea.Close(); eb.Close() })
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
	l, err := afxdprpc.Transport(eb).Listen("")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	c := rpc.NewClient(eb.Addr().String(), rpc.ClientOptions{Transport: afxdprpc.Transport(ea)})
	t.Cleanup(func() { c.Close() })
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
	testwait.For(t, 30*time.Second, eb.Stats, func(st afxdp.Stats) bool { return st.Deferred > 0 },
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
