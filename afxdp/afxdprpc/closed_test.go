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
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/internal/tlstest"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/rpctest"
	"github.com/starwire/starwire/rpc/tcp"
)

// TestErrClosed: the errors of a packet session, over an in-memory link
// and over AF_XDP (an endpoint and a group of reactors), and of a dual
// connection, with a packet path, with TCP only and over TLS (the packet
// ticket in the hello), closed by either end wrap rpc.ErrClosed, as TCP's
// do (rpctest.CheckClosed).
func TestErrClosed(t *testing.T) {
	for _, closer := range []string{"client", "server"} {
		t.Run("xsk/"+closer+" closes", func(t *testing.T) {
			p := netnstest.NewForTest(t, netns.Options{})
			srvEP, cliEP, _, _ := xskEndpoints(t, p, link.XSKOptions{}, nil)
			checkClosed(t, afxdprpc.Transport(cliEP), afxdprpc.Transport(srvEP), srvEP.Addr().String(), closer)
		})
		t.Run("xdp group/"+closer+" closes", func(t *testing.T) {
			p := netnstest.NewForTest(t, netns.Options{})
			const port = 7716
			srvG, cliG := openXDPIn(t, p.B, port), openXDPIn(t, p.A, port)
			checkClosed(t, afxdprpc.Transport(cliG), afxdprpc.Transport(srvG), srvG.Addr().String(), closer)
		})
		t.Run("dual tcp only/"+closer+" closes", func(t *testing.T) {
			opts := afxdprpc.DualOptions{Logger: slog.New(slog.DiscardHandler)}
			checkClosed(t, afxdprpc.Dual(&tcp.Transport{}, nil, opts), afxdprpc.Dual(&tcp.Transport{}, nil, opts), "127.0.0.1:0", closer)
		})
		t.Run("dual tls/"+closer+" closes", func(t *testing.T) {
			files := tlstest.NewCA(t, "closed-ca").Dir(t, t.TempDir())
			cfg, err := (&tcp.TLSFiles{CertFile: files.Cert, KeyFile: files.Key, CAFile: files.CA}).Config()
			if err != nil {
				t.Fatal(err)
			}
			srvEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{})
			cliEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Backlog: -1})
			opts := afxdprpc.DualOptions{Path: netpath.UDP, AllowUDP: true, Policy: afxdprpc.PathPolicy{Mode: afxdprpc.PathAFXDP},
				Logger: slog.New(slog.DiscardHandler)}
			checkClosed(t, afxdprpc.Dual(&tcp.Transport{TLS: cfg}, cliEP, opts), afxdprpc.Dual(&tcp.Transport{TLS: cfg}, srvEP, opts), "127.0.0.1:0", closer)
		})
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
// runs rpctest.CheckClosed with closer's end closing. The client dials
// while the server's end receives, where a TLS server's handshake runs.
func checkClosed(t *testing.T, cli, srv rpc.Transport, addr, closer string) {
	t.Helper()
	l, err := srv.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := rpctest.Dial(func() (rpctest.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cli.Dial(ctx, l.Addr().String())
	})
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	rpctest.CheckClosedDialing(t, d, s, closer == "client", rpc.ErrClosed)
}
