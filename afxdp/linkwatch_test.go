package afxdp_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/wire"
)

// TestXSKLinkDown: when the dialer's interface goes down or is removed, its
// endpoint stops at once with ErrLinkDown, ending its sessions (idle or
// sending), instead of waiting DeadAfter for acknowledgements.
func TestXSKLinkDown(t *testing.T) {
	tests := []struct {
		name string
		ip   func(e *netns.End) []string // the command that takes the link away
		send bool                        // a message is sent afterwards
	}{
		{"down", func(e *netns.End) []string { return []string{"-n", e.NS, "link", "set", e.Link, "down"} }, false},
		{"removed", func(e *netns.End) []string { return []string{"-n", e.NS, "link", "del", e.Link} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := netnstest.NewForTest(t, netns.Options{})
			srv := afxdp.NewEndpoint(openXSK(t, p.B, link.XSKOptions{}), afxdp.Options{Ticket: testTicket})
			cli := afxdp.NewEndpoint(openXSK(t, p.A, link.XSKOptions{}), afxdp.Options{Ticket: testTicket, Backlog: -1})
			t.Cleanup(func() { cli.Close(); srv.Close() })
			go func() {
				if c, err := srv.Accept(); err == nil {
					c.Receive(discard{})
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			c, err := cli.Dial(ctx, fmt.Sprintf("%s:%d", p.B.Addr, xskPort))
			if err != nil {
				t.Fatal(err)
			}
			go c.Receive(discard{})
			done := make(doneChan, 2)
			if err := c.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1}, Done: done}); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}

			if out, err := exec.Command("ip", tt.ip(p.A)...).CombinedOutput(); err != nil {
				t.Fatalf("ip %v: %v: %s", tt.ip(p.A), err, out)
			}
			var sendErr error
			if tt.send {
				// Either Send refuses it (the endpoint already stopped) or
				// it completes with an error.
				sendErr = c.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 2}, Done: done})
			}
			select {
			case <-c.Done():
			case <-time.After(3 * time.Second): // DeadAfter is 5s
				t.Fatal("the session outlived its interface")
			}
			if !errors.Is(c.Err(), link.ErrLinkDown) {
				t.Fatalf("session ended with %v, want ErrLinkDown", c.Err())
			}
			if tt.send && sendErr == nil {
				if err := <-done; err == nil {
					t.Fatal("a message sent after the interface went away completed without error")
				}
			}
			if _, err := cli.Dial(ctx, fmt.Sprintf("%s:%d", p.B.Addr, xskPort)); !errors.Is(err, link.ErrLinkDown) {
				t.Fatalf("dial after the interface went away: %v, want ErrLinkDown", err)
			}
		})
	}
}
