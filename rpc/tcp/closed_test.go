package tcp

import (
	"testing"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/rpctest"
)

// TestErrClosed: the errors of a TCP connection closed by either end wrap
// rpc.ErrClosed (rpctest.CheckClosed).
func TestErrClosed(t *testing.T) {
	for _, closer := range []string{"client", "server"} {
		t.Run(closer+" closes", func(t *testing.T) {
			tr := &Transport{}
			l, err := tr.Listen("127.0.0.1:0")
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
			cli := dialTCPConn(t, tr, l.Addr().String())
			srv := <-accepted
			if srv == nil {
				cli.Close()
				return
			}
			if closer == "client" {
				rpctest.CheckClosed(t, cli, srv, rpc.ErrClosed)
			} else {
				rpctest.CheckClosed(t, srv, cli, rpc.ErrClosed)
			}
		})
	}
}
