package tcp

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/internal/seamtest"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/rpctest"
	"github.com/starwire/starwire/wire"
)

// TestErrClosed: the errors of a TCP connection, plain or over TLS,
// closed by either end wrap rpc.ErrClosed (rpctest.CheckClosed).
func TestErrClosed(t *testing.T) {
	srvTLS, cliTLS := tlsConfigs(t)
	for _, sec := range []struct {
		name     string
		srv, cli *tls.Config
	}{{"tcp", nil, nil}, {"tls", srvTLS, cliTLS}} {
		for _, closer := range []string{"client", "server"} {
			t.Run(sec.name+"/"+closer+" closes", func(t *testing.T) {
				cli, srv := connPair(t, &Transport{TLS: sec.cli}, &Transport{TLS: sec.srv})
				rpctest.CheckClosedDialing(t, cli, srv, closer == "client", rpc.ErrClosed)
			})
		}
	}
}

// TestTLSOffersWhatPlainDoes: a TLS connection offers the core every
// capability a plain one does, but a read side to lend (its records may
// hold parts of several frames: see SelfReading).
func TestTLSOffersWhatPlainDoes(t *testing.T) {
	srvTLS, cliTLS := tlsConfigs(t)
	plainDialing, plainSrv := connPair(t, &Transport{}, &Transport{})
	tlsDialing, tlsSrv := connPair(t, &Transport{TLS: cliTLS}, &Transport{TLS: srvTLS})
	go tlsSrv.Receive(dropFrames{}) // the server's handshake
	plainCli, err := plainDialing.Conn()
	if err != nil {
		t.Fatal(err)
	}
	tlsCli, err := tlsDialing.Conn()
	if err != nil {
		t.Fatal(err)
	}
	recordsMix := seamtest.Dropping[readside.Reader]("TLS records may hold parts of several frames")
	seamtest.CheckForwards(t, tlsCli, plainCli, recordsMix)
	seamtest.CheckForwards(t, tlsSrv, plainSrv, recordsMix)
	for _, c := range []rpctest.Conn{plainCli, plainSrv, tlsCli, tlsSrv} {
		c.Close()
	}
}

// tlsConfigs returns a server's and a client's mutual TLS configuration
// under one test CA.
func tlsConfigs(t *testing.T) (srv, cli *tls.Config) {
	t.Helper()
	f := newTestCA(t, "closed-ca").files(t, t.TempDir(), "end")
	srv, err := f.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err = f.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return srv, cli
}

// connPair returns the two ends of a connection dialed with cli to a
// listener of srv: the client's as it is being dialed (a TLS client's Dial
// waits for the server's Receive, where its handshake runs).
func connPair(t *testing.T, cli, srv *Transport) (*rpctest.Dialing, rpc.Conn) {
	t.Helper()
	l, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	d := rpctest.Dial(func() (rpctest.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cli.Dial(ctx, l.Addr().String())
	})
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

// dropFrames is a receiver that drops frames without tensors.
type dropFrames struct{}

func (dropFrames) Alloc(in *wire.Inbound) error { return nil }
func (dropFrames) Deliver(in *wire.Inbound)     { in.Release() }
