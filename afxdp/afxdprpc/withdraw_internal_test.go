package afxdprpc

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// heldConn is a stream path that holds what it is sent until withdrawn.
type heldConn struct {
	mu    sync.Mutex
	held  []*wire.Message
	asked int
}

func (c *heldConn) Send(m *wire.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = append(c.held, m)
	return nil
}

func (c *heldConn) Withdraw(m *wire.Message) rpc.Withdrawal {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked++
	if i := slices.Index(c.held, m); i >= 0 {
		c.held = slices.Delete(c.held, i, i+1)
		return rpc.Unsent
	}
	return rpc.Completing
}

func (c *heldConn) Receive(r wire.Receiver) error { select {} }
func (c *heldConn) Close() error                  { return nil }
func (c *heldConn) LocalAddr() net.Addr           { return &net.TCPAddr{} }
func (c *heldConn) RemoteAddr() net.Addr          { return &net.TCPAddr{} }

type doneChan chan error

func (d doneChan) Sent(m *wire.Message, err error) { d <- err }

// TestDualWithdraw: the dual conn takes a message back from the path that
// holds it. A request sent on TCP before the packet session opened is
// withdrawn from TCP; one the packet session holds (its peer has no room
// for it) from the session, without asking TCP; one the session completed
// is Completing, as TCP holds it neither.
func TestDualWithdraw(t *testing.T) {
	const mib = 1 << 20
	a, b := netip.MustParseAddrPort("198.18.0.1:7000"), netip.MustParseAddrPort("198.18.0.2:7000")
	la, lb := link.MemPair(a, b, link.MemOptions{})
	ea := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket})
	eb := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket, SessionMemory: 4 * mib, EndpointMemory: 4 * mib})
	t.Cleanup(func() { ea.Close(); eb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := ea.DialAddr(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eb.AcceptContext(ctx); err != nil { // nothing reads it: frames stay held
		t.Fatal(err)
	}

	tcp := &heldConn{}
	c := &dualConn{d: &dual{}, tcp: tcp}
	done := make(doneChan, 4)
	msg := func(id uint64, n int) *wire.Message {
		return &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: id}, Done: done,
			Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(n)}, Data: make([]byte, n)}}}
	}
	onTCP := msg(1, 100)
	if err := c.Send(onTCP); err != nil {
		t.Fatal(err)
	}
	c.opened.Store(p)
	c.pkt.Store(p)
	first, second := msg(2, 3*mib), msg(3, 3*mib)
	for _, m := range []*wire.Message{first, second} {
		if err := c.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Withdraw(onTCP); got != rpc.Unsent {
		t.Fatalf("withdraw of a request TCP holds: %v, want Unsent", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first packet request never completed")
	}
	asked := tcp.asked
	if got := c.Withdraw(second); got != rpc.Unsent && got != rpc.Withdrawn {
		t.Fatalf("withdraw of a request the packet session holds: %v, want Unsent or Withdrawn", got)
	}
	if tcp.asked != asked {
		t.Fatal("TCP was asked for a request the packet session held")
	}
	if got := c.Withdraw(first); got != rpc.Completing {
		t.Fatalf("withdraw of a completed request: %v, want Completing", got)
	}
	select {
	case <-done:
		t.Fatal("a withdrawn request completed")
	default:
	}
}
