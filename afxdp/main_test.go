package afxdp_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/afxdptest"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
)

// xskServerRole is the helper role (afxdptest.StartHelper) accepting
// sessions in a process a test can kill.
const xskServerRole = "xsk-server"

func TestMain(m *testing.M) {
	afxdptest.ServeHelper(xskServerRole, runHelperServer)
	// Every test stops what it started: endpoints, their reactors and
	// Receive loops, helper processes.
	testwait.VerifyTestMain(m)
}

// runHelperServer accepts sessions and drops what they carry, until
// killed or its parent is done.
func runHelperServer(h afxdptest.Helper) (stop func(), err error) {
	l, err := link.OpenXSK(h.Link, link.XSKOptions{Port: xskPort})
	if err != nil {
		return nil, err
	}
	ep := afxdp.NewEndpoint(l, afxdp.Options{Ticket: testTicket})
	go func() {
		for {
			c, err := ep.Accept()
			if err != nil {
				return
			}
			go c.Receive(discard{})
		}
	}()
	return func() { ep.Close() }, nil
}

type discard struct{}

func (discard) Alloc(in *wire.Inbound) error { in.AllocPooled(); return nil }
func (discard) Deliver(in *wire.Inbound)     { in.Release() }

// TestXSKPeerKilled kills the receiving process in the middle of a large
// transfer: the sender's message must complete with ErrPeerUnreachable
// within the dead-peer bound, and the dead process's XDP program must be
// gone from its interface.
func TestXSKPeerKilled(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	cmd := afxdptest.StartHelper(t, p.B, xskServerRole, "")

	const deadAfter = 500 * time.Millisecond
	opts := afxdp.Options{Ticket: testTicket, DeadAfter: deadAfter, MaxRTO: 100 * time.Millisecond, Backlog: -1}
	cli := afxdp.NewEndpoint(openXSK(t, p.A, link.XSKOptions{}), opts)
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := cli.Dial(ctx, fmt.Sprintf("%s:%d", p.B.Addr, xskPort))
	if err != nil {
		t.Fatal(err)
	}
	size := 128 << 20 // within the default SessionMemory
	data := pattern(size, 2)
	done := make(doneChan, 1)
	if err := c.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1},
		Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(size)}, Data: data}}, Done: done}); err != nil {
		t.Fatal(err)
	}
	// Kill the peer once the transfer is under way: a few thousand
	// packets of its 90 thousand sent.
	var ended error
	testwait.Eventually(t, 10*time.Second, func() bool {
		select {
		case ended = <-done:
			t.Fatalf("the transfer ended before the peer was killed: %v", ended)
		default:
		}
		return cli.Stats().Sent >= 4096
	}, "the transfer to start: %+v", cli.Stats())
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	bound := deadAfter + opts.MaxRTO + time.Second
	select {
	case err := <-done:
		if !errors.Is(err, afxdp.ErrPeerUnreachable) {
			t.Fatalf("message completed with %v", err)
		}
		t.Logf("completed %v after the kill: %v", time.Since(killed), err)
	case <-time.After(bound):
		t.Fatalf("message not completed %v after the kill", bound)
	}
	cmd.Wait()
	// The program was attached through a bpf_link, which dies with the process.
	testwait.Eventually(t, 10*time.Second, func() bool {
		on, err := p.B.XDPAttached()
		if err != nil {
			t.Fatal(err)
		}
		return !on
	}, "the killed process's XDP program to be detached")
}
