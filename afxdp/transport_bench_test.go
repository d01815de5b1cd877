package afxdp_test

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// The transport benchmark runs real rpc calls between two namespaces over
// one veth pair (copy mode), through starwire's packet transport over
// AF_XDP and over kernel UDP, and through the TCP transport: 64-byte calls
// one at a time and with 32 in flight (calls/s, p50 and p99 latency), and a
// 16 MiB tensor sent per call (GB/s); the tensor also over AF_XDP on a
// veth with a 9000-byte MTU.

var methodSink = rpc.NewMethod("afxdp.test.Sink")

// benchEnv is a server in B and a client dialing it from A.
type benchEnv struct {
	client *rpc.Client
}

// nsTCP dials from inside a namespace, so the TCP client reaches the
// server's address on the veth.
type nsTCP struct {
	rpc.TCP
	end *netns.End
}

func (t *nsTCP) Dial(ctx context.Context, addr string) (c rpc.Conn, err error) {
	err = t.end.Do(func() error { c, err = t.TCP.Dial(ctx, addr); return err })
	return c, err
}

const benchPort = 7800

// benchKind splits a benchmark name into the transport and the veth's MTU
// and UMEM chunk size.
func benchKind(kind string) (string, int, afxdp.XSKOptions) {
	if kind == "afxdp-jumbo" {
		// 9000-byte MTU, 4 KiB UMEM chunks: 3798 bytes of data a packet.
		return "afxdp", 9000, afxdp.XSKOptions{FrameSize: 4096}
	}
	return kind, 0, afxdp.XSKOptions{}
}

// startBenchServer serves the echo and sink methods over kind on the veth
// end named link with address addr, in the calling thread's namespace. It
// returns a function that stops it.
func startBenchServer(kind, link string, addr netip.Addr, xo afxdp.XSKOptions) (stop func(), err error) {
	srv := rpc.NewServer()
	srv.Register(methodEcho, echoHandler, rpc.HandlerOptions{Inline: true})
	srv.Register(methodSink, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error { return nil }, rpc.HandlerOptions{Inline: true})
	var l rpc.Listener
	closeEP := func() {}
	switch kind {
	case "tcp":
		if l, err = (&rpc.TCP{}).Listen(netip.AddrPortFrom(addr, benchPort).String()); err != nil {
			return nil, err
		}
	default:
		var ln afxdp.Link
		if kind == "afxdp" {
			xo.Port = benchPort
			ln, err = afxdp.OpenXSK(link, xo)
		} else {
			ln, err = afxdp.ListenUDP(netip.AddrPortFrom(addr, benchPort).String(), afxdp.UDPOptions{})
		}
		if err != nil {
			return nil, err
		}
		ep := afxdp.NewEndpoint(ln, afxdp.OptionsFromEnv("ps", 0))
		closeEP = func() { ep.Close() }
		if l, err = afxdprpc.Transport(ep).Listen(""); err != nil {
			ep.Close()
			return nil, err
		}
	}
	go srv.Serve(l)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		closeEP()
	}, nil
}

// newBenchEnv starts the server in B, in this process or, with
// separate, in a process of its own (the layout users deploy), and a client
// dialing it from A.
func newBenchEnv(b *testing.B, name string, separate bool) *benchEnv {
	kind, mtu, xo := benchKind(name)
	p := netns.NewForTest(b, netns.Options{MTU: mtu})
	if separate {
		startHelper(b, p.B, "rpc-server", name)
	} else {
		var stop func()
		if err := p.B.Do(func() (err error) { stop, err = startBenchServer(kind, p.B.Link, p.B.Addr, xo); return err }); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(stop)
	}
	addr := netip.AddrPortFrom(p.B.Addr, benchPort).String()
	var cliT rpc.Transport
	switch kind {
	case "tcp":
		cliT = &nsTCP{end: p.A}
	default:
		var lc afxdp.Link
		if kind == "afxdp" {
			lc = openXSK(b, p.A, xo)
		} else {
			if err := p.A.Do(func() (err error) { lc, err = afxdp.ListenUDP(p.A.Addr.String()+":0", afxdp.UDPOptions{}); return err }); err != nil {
				b.Fatal(err)
			}
		}
		ec := afxdp.NewEndpoint(lc, afxdp.OptionsFromEnv("worker", 1))
		b.Cleanup(func() { ec.Close() })
		cliT = afxdprpc.Transport(ec)
	}
	c := rpc.NewClient(addr, rpc.ClientOptions{Transport: cliT})
	b.Cleanup(func() { c.Close() })
	// One call so the connection is up before timing.
	var r rpc.Reply
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Call(ctx, methodEcho, &rpc.Request{Meta: []byte("warm")}, &r); err != nil {
		b.Fatal(err)
	}
	r.Release()
	return &benchEnv{client: c}
}

// callsBench runs b.N 64-byte echo calls from inflight goroutines and
// reports throughput and latency percentiles.
func callsBench(b *testing.B, env *benchEnv, inflight int) {
	payload := make([]byte, 64)
	lat := make([][]time.Duration, inflight)
	per := b.N / inflight
	b.ReportAllocs()
	b.SetBytes(2 * 64)
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := range inflight {
		n := per
		if g == 0 {
			n += b.N % inflight
		}
		lat[g] = make([]time.Duration, 0, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var reply rpc.Reply
			req := rpc.Request{Meta: payload}
			for range n {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				t0 := time.Now()
				err := env.client.Call(ctx, methodEcho, &req, &reply)
				lat[g] = append(lat[g], time.Since(t0))
				cancel()
				if err != nil {
					b.Error(err)
					return
				}
				reply.Release()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), "p99-ns")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// tensorBench sends a 16 MiB tensor per call to a method that answers
// with nothing.
func tensorBench(b *testing.B, env *benchEnv) {
	const size = 16 << 20
	data := pattern(size, 1)
	req := rpc.Request{Tensors: []wire.Tensor{{DType: wire.DTFloat, Shape: []int64{size / 4}, Data: data}}}
	var reply rpc.Reply
	b.ReportAllocs()
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := env.client.Call(ctx, methodSink, &req, &reply)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		reply.Release()
	}
	b.ReportMetric(float64(b.N)*size/b.Elapsed().Seconds()/1e9, "GB/s")
}

func BenchmarkTransport(b *testing.B) { transportBench(b, false) }

// BenchmarkTransportProcesses is BenchmarkTransport with the server in a
// process of its own.
func BenchmarkTransportProcesses(b *testing.B) { transportBench(b, true) }

func transportBench(b *testing.B, separate bool) {
	for _, kind := range []string{"afxdp", "udp", "tcp", "afxdp-jumbo"} {
		b.Run(kind, func(b *testing.B) {
			env := newBenchEnv(b, kind, separate)
			if kind != "afxdp-jumbo" {
				b.Run("sequential", func(b *testing.B) { callsBench(b, env, 1) })
				b.Run("inflight32", func(b *testing.B) { callsBench(b, env, 32) })
			}
			b.Run("tensor16MiB", func(b *testing.B) { tensorBench(b, env) })
		})
	}
}
