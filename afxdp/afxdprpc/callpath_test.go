package afxdprpc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// pathCounts counts calls per path, as an interceptor sees them.
type pathCounts struct {
	mu sync.Mutex
	n  map[netpath.Path]uint64
}

func (p *pathCounts) add(path netpath.Path) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[netpath.Path]uint64{}
	}
	p.n[path]++
}

func (p *pathCounts) get() map[netpath.Path]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[netpath.Path]uint64{}
	for k, v := range p.n {
		out[k] = v
	}
	return out
}

// TestInterceptorsSeeEachCallsPath: over a dual connection under auto,
// which sends calls of one size over both paths while it learns them, the
// paths a client's and a server's interceptors see per call add up to the
// transport's own counts, and several callers at once (some reading their
// own answers on TCP) agree too.
func TestInterceptorsSeeEachCallsPath(t *testing.T) {
	srvEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket})
	cliEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket, Backlog: -1})
	opts := afxdprpc.DualOptions{Path: netpath.UDP, AllowUDP: true}

	var client, server pathCounts
	tl, err := afxdprpc.Dual(&tcp.Transport{}, srvEP, opts).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := rpc.NewServer()
	s.Interceptors = []rpc.ServerInterceptor{func(ctx context.Context, info *rpc.ServerInfo, req *wire.Inbound, resp *rpc.Response, next rpc.ServerHandler) error {
		server.add(info.Path)
		return next(ctx, info, req, resp)
	}}
	s.Register(echo, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	go s.Serve(tl)
	t.Cleanup(func() { s.Close() })

	tr := afxdprpc.Dual(&tcp.Transport{}, cliEP, opts)
	c := rpc.NewClient(tl.Addr().String(), rpc.ClientOptions{Transport: tr, Interceptors: []rpc.ClientInterceptor{
		func(ctx context.Context, info *rpc.ClientInfo, req *rpc.Request, reply *rpc.Reply, invoke rpc.Invoker) error {
			err := invoke(ctx, info, req, reply)
			if err == nil {
				client.add(info.Path)
			}
			return err
		}}})
	defer c.Close()
	waitPath(t, c, netpath.UDP)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			meta := make([]byte, 64)
			for i := range 100 {
				if g > 0 && i > 25 {
					break // one caller alone at the end: its answers may be read by itself
				}
				var r rpc.Reply
				if err := c.Call(ctx, echo, &rpc.Request{Meta: meta}, &r); err != nil {
					errs <- err
					return
				}
				r.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	st := tr.Totals()
	got := client.get()
	if got[netpath.TCP] != st.TCPCalls || got[netpath.UDP] != st.AFXDPCalls || len(got) > 2 {
		t.Errorf("the client's interceptor saw %v; the transport counted %d over tcp and %d over %s", got, st.TCPCalls, st.AFXDPCalls, netpath.UDP)
	}
	if st.TCPCalls == 0 || st.AFXDPCalls == 0 {
		t.Errorf("the transport counted %d calls over tcp and %d over %s: want both paths used", st.TCPCalls, st.AFXDPCalls, netpath.UDP)
	}
	if sg := server.get(); sg[netpath.TCP] != got[netpath.TCP] || sg[netpath.UDP] != got[netpath.UDP] {
		t.Errorf("the server's interceptor saw %v, the client's %v", sg, got)
	}
}
