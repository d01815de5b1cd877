// Package rpctest checks contracts every transport of rpc must keep, for
// the tests of rpc and of its transports: CheckClosed and
// CheckClosedDialing, rpc.ErrClosed's contract on both ends of a
// connection, and StuckPeer, a peer that reads nothing, for tests of a
// writer stalled by its peer. Only tests import it; it imports nothing of
// rpc, so that rpc's own tests can use it.
package rpctest

import (
	"net"
	"testing"
)

// StuckPeer listens on a loopback TCP port, accepts one connection and
// reads nothing from it until read is closed; then it hands the connection
// to the test on conns.
func StuckPeer(tb testing.TB) (addr string, read chan struct{}, conns chan net.Conn) {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	read, conns = make(chan struct{}), make(chan net.Conn, 1)
	go func() {
		nc, err := l.Accept()
		l.Close()
		if err != nil {
			return
		}
		<-read
		conns <- nc
	}()
	return l.Addr().String(), read, conns
}
