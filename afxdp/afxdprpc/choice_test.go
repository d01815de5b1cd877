package afxdprpc_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

var (
	echoTensors = rpc.NewMethod("afxdprpc.test.EchoTensors") // answers with the request's tensors
	answerSized = rpc.NewMethod("afxdprpc.test.AnswerSized") // answers with a tensor of the size in Meta
	waitCancel  = rpc.NewMethod("afxdprpc.test.WaitCancel")  // returns when its call is cancelled
)

// pathServer counts the requests a server receives per path.
type pathServer struct {
	tcp, packet atomic.Int64
	started     chan struct{} // a WaitCancel call began
	cancelled   chan struct{} // a WaitCancel call saw its context end
}

// count is a server interceptor counting each call by the path it came
// over: a packet session's peer is a UDP address. It counts in the
// server's handlers rather than in a wrapper of its connections, which
// would have to forward what the core asks of them.
func (s *pathServer) count(ctx context.Context, info *rpc.ServerInfo, req *wire.Inbound, resp *rpc.Response, h rpc.ServerHandler) error {
	n := &s.tcp
	if _, udp := info.Peer.(*net.UDPAddr); udp {
		n = &s.packet
	}
	n.Add(1)
	return h(ctx, info, req, resp)
}

func servePaths(t *testing.T, tr rpc.Transport, addr string) (*pathServer, string) {
	t.Helper()
	tl, err := tr.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	ps := &pathServer{started: make(chan struct{}, 4), cancelled: make(chan struct{}, 4)}
	s := rpc.NewServer()
	s.Interceptors = []rpc.ServerInterceptor{ps.count}
	s.Register(echo, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	s.Register(echoTensors, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		for _, tn := range req.Tensors {
			resp.Tensors = append(resp.Tensors, wire.Tensor{DType: tn.DType, Shape: tn.Shape, Data: bytes.Clone(tn.Data)})
		}
		return nil
	}, rpc.HandlerOptions{Inline: true})
	s.Register(answerSized, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		n := int64(binary.LittleEndian.Uint64(req.Meta))
		resp.Tensors = append(resp.Tensors, wire.Tensor{DType: wire.DTUint8, Shape: []int64{n}, Data: make([]byte, n)})
		return nil
	}, rpc.HandlerOptions{Inline: true})
	s.Register(waitCancel, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		ps.started <- struct{}{}
		select {
		case <-ctx.Done():
			ps.cancelled <- struct{}{}
			return ctx.Err()
		case <-time.After(10 * time.Second):
		}
		return nil
	}, rpc.HandlerOptions{})
	go s.Serve(tl)
	t.Cleanup(func() { s.Close() })
	return ps, tl.Addr().String()
}

// checkPaths runs calls of both sizes through a client whose policy sends
// calls of 4 KiB and more over TCP, and checks that each took its path
// whole, that its answer is right, that Stats counts them, and that a
// cancel reaches the call on the path it took.
func checkPaths(t *testing.T, c *rpc.Client, tr *afxdprpc.DualTransport, srv *pathServer, bypass netpath.Path) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	packet0, tcp0 := srv.packet.Load(), srv.tcp.Load()
	st0 := tr.Stats()[0]
	small, large := pattern(100, 1), pattern(1<<20, 2)
	for i := range 20 {
		// Alternate the sizes: calls one after another keep their order
		// whichever path each takes.
		data := small
		if i%2 == 1 {
			data = large
		}
		var r rpc.Reply
		req := rpc.Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data}}}
		if err := c.Call(ctx, echoTensors, &req, &r); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(r.Tensors) != 1 || !bytes.Equal(r.Tensors[0].Data, data) {
			t.Fatalf("call %d: wrong answer", i)
		}
		r.Release()
	}
	if got := srv.packet.Load() - packet0; got != 10 {
		t.Errorf("%d calls over %s, want the 10 small ones", got, bypass)
	}
	if got := srv.tcp.Load() - tcp0; got != 10 {
		t.Errorf("%d calls over TCP, want the 10 large ones", got)
	}
	st := tr.Stats()[0]
	if st.AFXDPCalls-st0.AFXDPCalls != 10 || st.TCPCalls-st0.TCPCalls != 10 {
		t.Errorf("stats %+v after %+v: want 10 calls more on each path", st, st0)
	}
	if st.TCPBytes-st0.TCPBytes < 20<<20 || st.AFXDPBytes-st0.AFXDPBytes >= 1<<20 {
		t.Errorf("stats %+v after %+v: the large calls' bytes are not on TCP", st, st0)
	}
	if st.Crossover != 4096 || st.Packet != bypass || st.Policy != "below 4KiB" {
		t.Errorf("stats %+v", st)
	}

	// A small request whose answer is large: once the method's answers
	// are known to be large, its calls go over TCP.
	for i := range 3 {
		var r rpc.Reply
		meta := binary.LittleEndian.AppendUint64(nil, 1<<20)
		if err := c.Call(ctx, answerSized, &rpc.Request{Meta: meta}, &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Tensors) != 1 || len(r.Tensors[0].Data) != 1<<20 {
			t.Fatalf("answer %d: wrong size", i)
		}
		r.Release()
	}
	if got := srv.tcp.Load() - tcp0; got != 12 {
		t.Errorf("%d calls over TCP, want the 10 large and the 2 answered large after the first", got-10)
	}

	// Deadlines and cancels, on each path.
	for _, size := range []int{100, 1 << 20} {
		data := pattern(size, 3)
		req := rpc.Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(size)}, Data: data}}}
		dctx, dcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		var r rpc.Reply
		err := c.Call(dctx, waitCancel, &req, &r)
		dcancel()
		if !errors.Is(err, context.DeadlineExceeded) && rpc.CodeOf(err) != wire.DeadlineExceeded {
			t.Errorf("%d-byte call past its deadline: %v", size, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%d-byte call returned %v after its 200ms deadline", size, d)
		}
		<-srv.started
		select {
		case <-srv.cancelled:
		case <-time.After(5 * time.Second):
			t.Errorf("the server never learned that the %d-byte call ended", size)
		}
		cctx, ccancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Call(cctx, waitCancel, &req, &rpc.Reply{}) }()
		select {
		case <-srv.started:
		case <-time.After(5 * time.Second):
			t.Fatalf("the %d-byte call never reached the server", size)
		}
		ccancel()
		<-done
		select {
		case <-srv.cancelled:
		case <-time.After(5 * time.Second):
			t.Errorf("the %d-byte call's cancel never reached it", size)
		}
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i) ^ seed
	}
	return b
}

// TestDualChoosesPathPerCall: over the packet protocol on kernel UDP.
func TestDualChoosesPathPerCall(t *testing.T) {
	srvEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket})
	cliEP := udpEndpoint(t, "127.0.0.1:0", afxdp.Options{Ticket: testTicket, Backlog: -1})
	opts := afxdprpc.DualOptions{Path: netpath.UDP, AllowUDP: true, Policy: afxdprpc.PathPolicy{Mode: afxdprpc.PathThreshold, Threshold: 4096}}
	srv, addr := servePaths(t, afxdprpc.Dual(&tcp.Transport{}, srvEP, opts), "127.0.0.1:0")
	tr := afxdprpc.Dual(&tcp.Transport{}, cliEP, opts)
	c := rpc.NewClient(addr, rpc.ClientOptions{Transport: tr})
	defer c.Close()
	waitPath(t, c, netpath.UDP)
	checkPaths(t, c, tr, srv, netpath.UDP)
}

// TestDualChoosesPathPerCallAFXDP: the same between two network namespaces
// over veth, both ends on AF_XDP.
func TestDualChoosesPathPerCallAFXDP(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	const port = 7712
	srvG, cliG := openXDPIn(t, p.B, port), openXDPIn(t, p.A, port)
	opts := afxdprpc.DualOptions{Path: netpath.AFXDP, Policy: afxdprpc.PathPolicy{Mode: afxdprpc.PathThreshold, Threshold: 4096}}
	var srv *pathServer
	var addr string
	if err := p.B.Do(func() error {
		srv, addr = servePaths(t, afxdprpc.Dual(&tcp.Transport{}, srvG, opts), p.B.Addr.String()+":0")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tr := afxdprpc.Dual(&nsTCP{end: p.A}, cliG, opts)
	c := rpc.NewClient(addr, rpc.ClientOptions{Transport: tr})
	defer c.Close()
	waitPath(t, c, netpath.AFXDP)
	checkPaths(t, c, tr, srv, netpath.AFXDP)
}

// nsTCP dials from inside a namespace.
type nsTCP struct {
	tcp.Transport
	end *netns.End
}

func (n *nsTCP) Dial(ctx context.Context, addr string) (c rpc.Conn, err error) {
	err = n.end.Do(func() error { c, err = n.Transport.Dial(ctx, addr); return err })
	return c, err
}
