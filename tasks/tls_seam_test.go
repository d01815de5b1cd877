package tasks

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/starwire/starwire/internal/seamtest"
	"github.com/starwire/starwire/internal/tlstest"
)

// copies are what a read-ahead does not forward, and why.
var copies = []seamtest.Drop{
	seamtest.Dropping[io.ReaderFrom]("crypto/tls and gRPC, the only users of a read-ahead, write through Write"),
	seamtest.Dropping[io.WriterTo]("it would read past the bytes read ahead; crypto/tls and gRPC read through Read"),
}

// TestPeekForwards: a read-ahead offers what the conn under it offers, a
// TCP socket or a pipe, but for the copies; and the conns both ends'
// handshakes hand gRPC offer what those of gRPC's own TLS credentials do.
func TestPeekForwards(t *testing.T) {
	cli, _ := tcpPair(t)
	seamtest.CheckForwards(t, peek(cli, []byte{1}), cli, copies...)
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	seamtest.CheckForwards(t, peek(p, nil), p)

	ca := tlstest.NewCA(t, "cluster CA")
	creds, err := grpcCreds(tlsFiles(ca.Dir(t, filepath.Join(t.TempDir(), "task"))))
	if err != nil {
		t.Fatal(err)
	}
	plain := creds.(confirmedCreds).TransportCredentials
	ours, oursSrv := handshake(t, creds)
	theirs, theirsSrv := handshake(t, plain)
	seamtest.CheckForwards(t, ours, theirs)
	seamtest.CheckForwards(t, oursSrv, theirsSrv)
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (cli, srv *net.TCPConn) {
	t.Helper()
	l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.DialTCP("tcp", nil, l.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.AcceptTCP()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// handshake runs creds' handshakes at both ends of a loopback TCP
// connection, the server speaking first as gRPC's does, and returns the
// conns they hand gRPC.
func handshake(t *testing.T, creds credentials.TransportCredentials) (cli, srv net.Conn) {
	t.Helper()
	rawCli, rawSrv := tcpPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rawSrv.SetDeadline(time.Now().Add(10 * time.Second))
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, _, err := creds.ServerHandshake(rawSrv)
		if err == nil {
			_, err = c.Write([]byte{0})
		}
		done <- result{c, err}
	}()
	cli, _, err := creds.ClientHandshake(ctx, "127.0.0.1", rawCli)
	r := <-done
	if err != nil || r.err != nil {
		t.Fatalf("handshake: client %v, server %v", err, r.err)
	}
	return cli, r.c
}
