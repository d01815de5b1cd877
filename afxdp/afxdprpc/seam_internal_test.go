package afxdprpc

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/internal/seamtest"
	"github.com/starwire/starwire/internal/tlstest"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// TestWrappersForward: the dual connection, the hello answerer, the
// receivers they hand the TCP reader and the packet session's rpc.Conn
// forward every capability of the seam the TCP connection, the session
// or the core's receiver they wrap offers, over plain TCP and over TLS,
// but for those each says in its doc it drops.
func TestWrappersForward(t *testing.T) {
	ca := tlstest.NewCA(t, "seam-ca")
	files := ca.Dir(t, t.TempDir())
	cfg, err := (&tcp.TLSFiles{CertFile: files.Cert, KeyFile: files.Key, CAFile: files.CA}).Config()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tls  *tls.Config
	}{{"tcp", nil}, {"tls", cfg}} {
		t.Run(tc.name, func(t *testing.T) {
			d := Dual(&tcp.Transport{TLS: tc.tls}, nil, DualOptions{Logger: slog.New(slog.DiscardHandler)})
			cli, srv := dualPair(t, d)
			seamtest.CheckForwards(t, cli, cli.tcp)
			seamtest.CheckForwards(t, srv, srv.Conn, serverConnDrops...)
		})
	}

	// A session as an rpc.Conn forwards the session's own capabilities.
	seamtest.CheckForwards(t, &packetConn{}, (*afxdp.Conn)(nil))

	client, server := seamtest.Receivers(t)
	seamtest.CheckForwards(t, newHelloReader(&dualConn{}, client), client)
	seamtest.CheckForwards(t, newAnswerReader(&helloAnswerer{}, server), server)
	seamtest.CheckForwards(t, answerTimer{c: &dualConn{}, r: client}, client,
		seamtest.Dropping[readside.Lender]("a packet session's reactor delivers every frame; it lends no read side"),
		seamtest.Dropping[readside.Waker]("a packet session's reactor does not ask whom a delivery woke"))
}

// serverConnDrops is what a server's TCP connection offers that the hello
// answerer does not forward (see its doc).
var serverConnDrops = []seamtest.Drop{
	seamtest.Dropping[readside.Reader]("the core lends the read side of client connections only"),
	seamtest.Dropping[rpc.Withdrawer]("the core withdraws requests, which a server does not send"),
}

// dualPair dials d's listener with d and returns both ends, each
// receiving; both are closed when the test ends.
func dualPair(t *testing.T, d *DualTransport) (*dualConn, *helloAnswerer) {
	t.Helper()
	l, err := d.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan rpc.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
			accepted <- nil
			return
		}
		go c.Receive(dropAll{}) // a TLS server's handshake runs in Receive
		accepted <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.Dial(ctx, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go c.Receive(dropAll{})
	s := <-accepted
	if s == nil {
		t.FailNow()
	}
	t.Cleanup(func() { s.Close() })
	return c.(*dualConn), s.(*helloAnswerer)
}

// dropAll is a receiver that drops frames without tensors.
type dropAll struct{}

func (dropAll) Alloc(in *wire.Inbound) error {
	if len(in.Tensors) > 0 {
		return errors.New("dropAll takes no tensors")
	}
	return nil
}

func (dropAll) Deliver(in *wire.Inbound) { in.Release() }
