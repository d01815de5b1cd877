package afxdpfabric

import (
	"context"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/internal/vethnet"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// TestFabricCarriesCalls builds a fabric of one server and two workers and
// checks every link has an endpoint on both ends, each with the options
// asked for, and that each worker's dual transport carries a call over
// its own link's AF_XDP session.
func TestFabricCarriesCalls(t *testing.T) {
	netnstest.Require(t)
	ticket := afxdp.NewTicket()
	asked := map[string]bool{}
	ps := []string{"/job:ps/replica:0/task:0"}
	workers := []string{"/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"}
	f, err := Build(ps, workers, Options{Port: 7702, Endpoint: func(e vethnet.End) (link.XSKOptions, afxdp.Options) {
		asked[e.Task+" "+e.Name] = true
		return link.XSKOptions{}, afxdp.Options{Ticket: &ticket}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Links) != 2 || len(asked) != 4 {
		t.Fatalf("%d links, options asked for %d ends; want 2 and 4", len(f.Links), len(asked))
	}
	echo := rpc.NewMethod("Echo")
	srv := rpc.NewServer()
	srv.Register(echo, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	defer srv.Close()
	tl, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(tl)
	for _, l := range f.Links {
		if l.PSEP == nil || l.WorkerEP == nil {
			t.Fatalf("link %s - %s: endpoints %v, %v", l.PS.Name, l.Worker.Name, l.PSEP, l.WorkerEP)
		}
		if got, want := l.PSEP.Addr().String(), f.Packet(l.PS); got != want {
			t.Errorf("the server's endpoint is at %s, Packet says %s", got, want)
		}
		pl, err := afxdprpc.Transport(l.PSEP).Listen("")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(pl)
		dual := f.Dual(&tcp.Transport{}, l.WorkerEP, l.PS, afxdprpc.PathPolicy{Mode: afxdprpc.PathAFXDP}, nil)
		var path netpath.Path
		c := rpc.NewClient(tl.Addr().String(), rpc.ClientOptions{Transport: dual, Interceptors: []rpc.ClientInterceptor{
			func(ctx context.Context, info *rpc.ClientInfo, req *rpc.Request, reply *rpc.Reply, invoke rpc.Invoker) error {
				err := invoke(ctx, info, req, reply)
				path = info.Path
				return err
			}}})
		// The session opens as the connection starts: call until a call
		// takes it, within a bound.
		deadline := time.Now().Add(10 * time.Second)
		for path != netpath.AFXDP && time.Now().Before(deadline) {
			var reply rpc.Reply
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := c.Call(ctx, echo, &rpc.Request{Meta: []byte("hello")}, &reply)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if string(reply.Meta) != "hello" {
				t.Fatalf("answer %q", reply.Meta)
			}
			reply.Release()
		}
		c.Close()
		if path != netpath.AFXDP {
			t.Errorf("%s's calls stayed on %q", l.Worker.Task, path)
		}
	}
}
