package tcp

import (
	"context"
	"crypto/tls"
	"net"
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
	ca := newTestCA(t, "closed-ca")
	f := ca.files(t, t.TempDir(), "end")
	srvTLS, err := f.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	cliTLS, err := f.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range []struct {
		name     string
		srv, cli *tls.Config
	}{{"tcp", nil, nil}, {"tls", srvTLS, cliTLS}} {
		for _, closer := range []string{"client", "server"} {
			t.Run(sec.name+"/"+closer+" closes", func(t *testing.T) {
				cli, s := connPair(t, &Transport{TLS: sec.cli}, &Transport{TLS: sec.srv})
				srv := dialedFirst{Conn: s, d: cli}
				if closer == "client" {
					rpctest.CheckClosed(t, cli, srv, rpc.ErrClosed)
				} else {
					rpctest.CheckClosed(t, srv, cli, rpc.ErrClosed)
				}
			})
		}
	}
}

// TestTLSOffersWhatPlainDoes: a TLS connection offers the core every
// capability a plain one does, but a read side to lend (its records may
// hold parts of several frames: see SelfReading).
func TestTLSOffersWhatPlainDoes(t *testing.T) {
	ca := newTestCA(t, "seam-ca")
	f := ca.files(t, t.TempDir(), "end")
	srvTLS, err := f.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	cliTLS, err := f.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	plainCli, plainSrv := connPair(t, &Transport{}, &Transport{})
	tlsCli, tlsSrv := connPair(t, &Transport{TLS: cliTLS}, &Transport{TLS: srvTLS})
	go tlsSrv.Receive(dropFrames{}) // the server's handshake
	recordsMix := seamtest.Dropping[readside.Reader]("TLS records may hold parts of several frames")
	seamtest.CheckForwards(t, tlsCli.get(), plainCli.get(), recordsMix)
	seamtest.CheckForwards(t, tlsSrv, plainSrv, recordsMix)
	for _, c := range []rpc.Conn{plainCli, plainSrv, tlsCli, tlsSrv} {
		c.Close()
	}
}

// connPair returns the two ends of a connection dialed with cli to a
// listener of srv: the client's as it is being dialed (a TLS client's Dial
// waits for the server's Receive, where its handshake runs).
func connPair(t *testing.T, cli, srv *Transport) (*dialing, rpc.Conn) {
	t.Helper()
	l, err := srv.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	d := &dialing{done: make(chan struct{})}
	go func() {
		defer close(d.done)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.c, d.err = cli.Dial(ctx, l.Addr().String())
	}()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

// dialing is a client connection being dialed; its methods wait for the
// dial, and fail as it failed.
type dialing struct {
	done chan struct{}
	c    rpc.Conn
	err  error
}

func (d *dialing) get() rpc.Conn {
	<-d.done
	if d.err != nil {
		return failedConn{d.err}
	}
	return d.c
}

func (d *dialing) Send(m *wire.Message) error    { return d.get().Send(m) }
func (d *dialing) Receive(r wire.Receiver) error { return d.get().Receive(r) }
func (d *dialing) Close() error                  { return d.get().Close() }
func (d *dialing) LocalAddr() net.Addr           { return d.get().LocalAddr() }
func (d *dialing) RemoteAddr() net.Addr          { return d.get().RemoteAddr() }

// dialedFirst is the server's end of a connection being dialed, whose
// Send and Close wait for the dial: a TLS handshake the server ended
// would fail the dial, and leave no client connection to check.
type dialedFirst struct {
	rpc.Conn
	d *dialing
}

func (c dialedFirst) Send(m *wire.Message) error {
	<-c.d.done
	return c.Conn.Send(m)
}

func (c dialedFirst) Close() error {
	<-c.d.done
	return c.Conn.Close()
}

// failedConn is a connection whose dial failed with err.
type failedConn struct{ err error }

func (c failedConn) Send(*wire.Message) error    { return c.err }
func (c failedConn) Receive(wire.Receiver) error { return c.err }
func (c failedConn) Close() error                { return nil }
func (c failedConn) LocalAddr() net.Addr         { return nil }
func (c failedConn) RemoteAddr() net.Addr        { return nil }

// dropFrames is a receiver that drops frames without tensors.
type dropFrames struct{}

func (dropFrames) Alloc(in *wire.Inbound) error { return nil }
func (dropFrames) Deliver(in *wire.Inbound)     { in.Release() }
