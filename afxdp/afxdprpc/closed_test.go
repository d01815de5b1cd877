package afxdprpc_test

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/rpctest"
	"github.com/starwire/starwire/rpc/tcp"
)

// TestErrClosed: the errors of a packet session, and of a dual
// connection, closed by either end wrap rpc.ErrClosed, as TCP's do
// (rpctest.CheckClosed).
func TestErrClosed(t *testing.T) {
	for _, closer := range []string{"client", "server"} {
		t.Run("packet/"+closer+" closes", func(t *testing.T) {
			a, b := netip.MustParseAddrPort("198.18.1.1:1"), netip.MustParseAddrPort("198.18.1.2:1")
			la, lb := link.MemPair(a, b, link.MemOptions{})
			srvEP := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket})
			cliEP := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket, Backlog: -1})
			defer srvEP.Close()
			defer cliEP.Close()
			checkClosed(t, afxdprpc.Transport(cliEP), afxdprpc.Transport(srvEP), b.String(), closer)
		})
		t.Run("dual/"+closer+" closes", func(t *testing.T) {
			srvEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket})
			cliEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket, Backlog: -1})
			opts := afxdprpc.DualOptions{Path: netpath.UDP, AllowUDP: true, Policy: afxdprpc.PathPolicy{Mode: afxdprpc.PathAFXDP},
				Logger: slog.New(slog.DiscardHandler)}
			srv := afxdprpc.Dual(&tcp.Transport{}, srvEP, opts)
			opts.Packet = srvEP.Addr().String()
			checkClosed(t, afxdprpc.Dual(&tcp.Transport{}, cliEP, opts), srv, "127.0.0.1:0", closer)
		})
	}
}

// checkClosed connects a client of cli to a listener of srv on addr and
// runs rpctest.CheckClosed with closer's end closing.
func checkClosed(t *testing.T, cli, srv rpc.Transport, addr, closer string) {
	t.Helper()
	l, err := srv.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan rpc.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := cli.Dial(ctx, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		c.Close()
		return
	}
	if closer == "client" {
		rpctest.CheckClosed(t, c, s, rpc.ErrClosed)
	} else {
		rpctest.CheckClosed(t, s, c, rpc.ErrClosed)
	}
}
