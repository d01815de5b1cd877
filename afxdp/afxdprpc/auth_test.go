package afxdprpc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/internal/tlstest"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
)

// issuing is a Network that records the tickets it issues and revokes.
type issuing struct {
	*afxdp.Endpoint
	mu      sync.Mutex
	issued  []afxdp.Ticket
	revoked []uint64
}

func (n *issuing) Issue() afxdp.Ticket {
	t := n.Endpoint.Issue()
	n.mu.Lock()
	n.issued = append(n.issued, t)
	n.mu.Unlock()
	return t
}

func (n *issuing) Revoke(id uint64) {
	n.Endpoint.Revoke(id)
	n.mu.Lock()
	n.revoked = append(n.revoked, id)
	n.mu.Unlock()
}

func (n *issuing) tickets() ([]afxdp.Ticket, []uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]afxdp.Ticket(nil), n.issued...), append([]uint64(nil), n.revoked...)
}

// TestHelloTicketOverTLS runs a dual connection over mutual TLS between
// packet endpoints that hold no ticket of their own: the packet session
// opens only under the ticket the server's hello handed the client, over
// TLS, and the calls move to it. A client without the ticket cannot open
// one; once the TCP connection closes, the ticket opens nothing more.
func TestHelloTicketOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "hello-ca")
	files := ca.Dir(t, t.TempDir())
	cfg, err := (&tcp.TLSFiles{CertFile: files.Cert, KeyFile: files.Key, CAFile: files.CA}).Config()
	if err != nil {
		t.Fatal(err)
	}
	srvEP := &issuing{Endpoint: udpEndpoint(t, "127.0.0.1:0", afxdp.Options{})}
	cliEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Backlog: -1})
	opts := afxdprpc.DualOptions{Path: netpath.UDP, AllowUDP: true, Policy: afxdprpc.PathPolicy{Mode: afxdprpc.PathAFXDP}}
	addr := serveDual(t, afxdprpc.Dual(&tcp.Transport{TLS: cfg}, srvEP, opts), "127.0.0.1:0")

	// Without the hello's ticket, the packet endpoint opens nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := cliEP.DialTicket(ctx, srvEP.Addr().String(), &afxdp.Ticket{ID: 1}); err == nil {
		t.Fatal("a session opened under a ticket the server never issued")
	}

	c := rpc.NewClient(addr, rpc.ClientOptions{Transport: afxdprpc.Dual(&tcp.Transport{TLS: cfg}, cliEP, opts)})
	waitPath(t, c, netpath.UDP)
	before := packetFrames.packet.Load()
	for i := range 20 {
		call(t, c, i)
	}
	if n := packetFrames.packet.Load() - before; n < 20 {
		t.Fatalf("%d of 20 calls reached the server over the packet session", n)
	}
	issued, _ := srvEP.tickets()
	if len(issued) != 1 {
		t.Fatalf("%d tickets issued for one connection", len(issued))
	}
	if st := srvEP.Stats(); st.Sessions != 1 || st.Unauthentic == 0 {
		t.Fatalf("server %+v: want the session under the ticket, and the one without dropped", st)
	}

	c.Close()
	testwait.Eventually(t, 10*time.Second, func() bool { _, revoked := srvEP.tickets(); return len(revoked) > 0 },
		"the ticket to be revoked when its connection closed")
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := cliEP.DialTicket(ctx, srvEP.Addr().String(), &issued[0]); err == nil {
		t.Fatal("the ticket of a closed connection opened a session")
	}
}
