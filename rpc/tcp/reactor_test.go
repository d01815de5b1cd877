package tcp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// Connections outlive a stopped reactor group: with calls in flight their
// callers write for themselves.
func TestStoppedReactorsStillWrite(t *testing.T) {
	rs := NewReactors(1)
	tr := &Transport{Reactors: rs}
	srv := rpc.NewServer()
	srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	c := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: tr})
	defer c.Close()
	rs.Stop()
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var reply rpc.Reply
			if err := c.Call(ctx, mEcho, &rpc.Request{Meta: []byte{byte(i)}}, &reply); err != nil {
				t.Error(err)
				return
			}
			reply.Release()
		}()
	}
	wg.Wait()
}
