package afxdprpc_test

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/afxdptest"
	"github.com/starwire/starwire/internal/cpuclock"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// The transport benchmark runs real rpc calls between two namespaces over
// one veth pair (copy mode), through starwire's packet transport over
// AF_XDP and over kernel UDP, and through the TCP transport: 64-byte calls
// one at a time and with 32 in flight (calls/s, p50 and p99 latency), and a
// 16 MiB tensor sent per call (GB/s); the tensor also over AF_XDP on a
// veth with a 9000-byte MTU.

// benchEnv is a server in B and a client dialing it from A. eps are the
// packet endpoints in this process, whose counters give packets per call.
type benchEnv struct {
	client    *rpc.Client
	eps       []*afxdp.Endpoint
	serverPID int // the server process, when it is not this one
}

// cpu returns the CPU times this process and the server's have used.
func (env *benchEnv) cpu() cpuclock.Times {
	t, _ := cpuclock.SelfAnd(env.serverPID)
	return t
}

const benchPort = 7800

// jumboFrameLen is the Ethernet frame afxdp-jumbo's full packets fill: a
// 4 KiB UMEM chunk less the receive headroom the link keeps.
const jumboFrameLen = 4096 - 256

// benchKind splits a benchmark name into the transport and the veth's MTU
// and UMEM chunk size.
func benchKind(kind string) (string, int, link.XSKOptions) {
	if kind == "afxdp-jumbo" {
		// 9000-byte MTU, 4 KiB UMEM chunks: 3798 bytes of data a packet.
		return "afxdp", 9000, link.XSKOptions{FrameSize: 4096}
	}
	return kind, 0, link.XSKOptions{}
}

// startBenchServer serves the echo and sink methods over kind on the veth
// end named ifname with address addr, in the calling thread's namespace. It
// returns a function that stops it.
func startBenchServer(kind, ifname string, addr netip.Addr, xo link.XSKOptions) (stop func(), ep *afxdp.Endpoint, err error) {
	srv := rpc.NewServer()
	srv.Register(methodEcho, echoHandler, rpc.HandlerOptions{Inline: true})
	srv.Register(methodSink, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error { return nil }, rpc.HandlerOptions{Inline: true})
	var l rpc.Listener
	closeEP := func() {}
	switch kind {
	case "tcp":
		if l, err = (&tcp.Transport{}).Listen(netip.AddrPortFrom(addr, benchPort).String()); err != nil {
			return nil, nil, err
		}
	default:
		var ln link.Link
		if kind == "afxdp" {
			xo.Port = benchPort
			ln, err = link.OpenXSK(ifname, xo)
		} else {
			ln, err = link.ListenUDP(netip.AddrPortFrom(addr, benchPort).String(), link.UDPOptions{})
		}
		if err != nil {
			return nil, nil, err
		}
		ep = afxdp.NewEndpoint(ln, benchAuth(envOptions("ps", 0)))
		closeEP = func() { ep.Close() }
		if l, err = afxdprpc.Transport(ep).Listen(""); err != nil {
			ep.Close()
			return nil, nil, err
		}
	}
	go srv.Serve(l)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		closeEP()
	}, ep, nil
}

// newBenchEnv starts the server in B, in this process or, with
// separate, in a process of its own (the layout users deploy), and a client
// dialing it from A.
func newBenchEnv(b *testing.B, name string, separate bool) *benchEnv {
	kind, mtu, xo := benchKind(name)
	p := netnstest.NewForTest(b, netns.Options{MTU: mtu})
	env := &benchEnv{}
	if separate {
		env.serverPID = afxdptest.StartHelper(b, p.B, benchServerRole, name).Process.Pid
	} else {
		var stop func()
		var ep *afxdp.Endpoint
		if err := p.B.Do(func() (err error) { stop, ep, err = startBenchServer(kind, p.B.Link, p.B.Addr, xo); return err }); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(stop)
		if ep != nil {
			env.eps = append(env.eps, ep)
		}
	}
	addr := netip.AddrPortFrom(p.B.Addr, benchPort).String()
	var cliT rpc.Transport
	switch kind {
	case "tcp":
		cliT = &nsTCP{end: p.A}
	default:
		var lc link.Link
		if kind == "afxdp" {
			lc = openXSK(b, p.A, xo)
		} else {
			lc = udpIn(b, p.A, 0, link.UDPOptions{})
		}
		ec := afxdp.NewEndpoint(lc, benchAuth(envOptions("worker", 1)))
		b.Cleanup(func() { ec.Close() })
		env.eps = append(env.eps, ec)
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
	env.client = c
	return env
}

// xskDrops sums what the kernel dropped on the way into the AF_XDP
// sockets of the endpoints in this process (full RX ring, no fill frame).
func (env *benchEnv) xskDrops() uint64 {
	var n uint64
	for _, ep := range env.eps {
		l, ok := ep.Link().(*link.XSKLink)
		if !ok {
			continue
		}
		for _, s := range l.Sockets() {
			if st, err := s.Stats(); err == nil {
				n += st.Rx_dropped + st.Rx_ring_full + st.Rx_fill_ring_empty_descs
			}
		}
	}
	return n
}

// packetCounts are the counters of the packet endpoints in this process.
type packetCounts struct {
	afxdp.Stats
	xskDrops uint64
}

// packets sums the counters of the packet endpoints in this process.
func (env *benchEnv) packets() packetCounts {
	t := packetCounts{xskDrops: env.xskDrops()}
	for _, ep := range env.eps {
		s := ep.Stats()
		t.Sent += s.Sent
		t.Acks += s.Acks
		t.Batches += s.Batches
		t.Resent += s.Resent
		t.Helped += s.Helped
	}
	return t
}

// reportPackets reports, for the packet transports, packets and ACK-only
// packets per op, packets per flush of the link, resends, and
// packets the kernel dropped before the AF_XDP sockets.
func (env *benchEnv) reportPackets(b *testing.B, before packetCounts) {
	if len(env.eps) == 0 {
		return
	}
	after := env.packets()
	sent, n := float64(after.Sent-before.Sent), float64(b.N)
	b.ReportMetric(sent/n, "pkts/op")
	b.ReportMetric(float64(after.Acks-before.Acks)/n, "acks/op")
	if k := after.Batches - before.Batches; k > 0 {
		b.ReportMetric(sent/float64(k), "pkts/flush")
	}
	b.ReportMetric(float64(after.Resent-before.Resent), "resent")
	b.ReportMetric(float64(after.Helped-before.Helped)/n, "helped/op")
	if _, ok := env.eps[0].Link().(*link.XSKLink); ok {
		b.ReportMetric(float64(after.xskDrops-before.xskDrops), "xsk-drops")
	}
}

// callsResult is what callsBench measured.
type callsResult struct {
	rate float64 // calls per second
	p50  float64 // ns
	cpu  float64 // CPU ns per call, both ends
	sys  float64 // of which in the kernel
}

// callsBench runs b.N 64-byte echo calls from inflight goroutines and
// reports throughput and latency percentiles.
func callsBench(b *testing.B, env *benchEnv, inflight int) callsResult {
	payload := make([]byte, 64)
	lat := make([][]time.Duration, inflight)
	per := b.N / inflight
	b.ReportAllocs()
	b.SetBytes(2 * 64)
	before, cpu0 := env.packets(), env.cpu()
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
			// One deadline for the whole run, so every call carries one
			// but allocs/op counts the transport's allocations only.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			for range n {
				t0 := time.Now()
				err := env.client.Call(ctx, methodEcho, &req, &reply)
				lat[g] = append(lat[g], time.Since(t0))
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
	used := env.cpu().Sub(cpu0)
	res := callsResult{rate: float64(b.N) / b.Elapsed().Seconds(),
		cpu: float64(used.Total()) / float64(b.N), sys: float64(used.System) / float64(b.N)}
	// Kernel CPU (system calls, and the receive path a transmit kick
	// drives) apart from the stack's own, which includes spinning.
	b.ReportMetric(res.cpu, "cpu-ns/op")
	b.ReportMetric(res.sys, "sys-ns/op")
	env.reportPackets(b, before)
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		res.p50 = float64(all[len(all)/2].Nanoseconds())
		b.ReportMetric(res.p50, "p50-ns")
		b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), "p99-ns")
	}
	b.ReportMetric(res.rate, "calls/s")
	return res
}

// tensorBench sends a 16 MiB tensor per call to a method that answers
// with nothing, and returns the tensor bytes per second.
func tensorBench(b *testing.B, env *benchEnv) float64 {
	const size = 16 << 20
	data := pattern(size, 1)
	req := rpc.Request{Tensors: []wire.Tensor{{DType: wire.DTFloat, Shape: []int64{size / 4}, Data: data}}}
	var reply rpc.Reply
	b.ReportAllocs()
	b.SetBytes(size)
	before, cpu0 := env.packets(), env.cpu()
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
	used := env.cpu().Sub(cpu0)
	b.ReportMetric(float64(used.Total())/float64(b.N)/(size>>20), "cpu-ns/MiB")
	b.ReportMetric(float64(used.System)/float64(b.N)/(size>>20), "sys-ns/MiB")
	env.reportPackets(b, before)
	rate := float64(b.N) * size / b.Elapsed().Seconds()
	b.ReportMetric(rate/1e9, "GB/s")
	return rate
}

// BenchmarkTransport runs, in one command, the limits of this path (a raw
// AF_XDP frame echo waiting in poll() and spinning, and raw one-way
// streams), sequential calls over an in-memory link (the software's own
// round trip) and starwire over AF_XDP, kernel UDP and TCP, then logs each
// target of the kernel-bypass path as a ratio of figures of this run:
//
//	go test ./afxdp/afxdprpc -run '^$' -bench 'Transport$' -benchtime 2s
func BenchmarkTransport(b *testing.B) { transportBench(b, false) }

// BenchmarkTransportProcesses is BenchmarkTransport with the server in a
// process of its own (the raw echo server too).
func BenchmarkTransportProcesses(b *testing.B) { transportBench(b, true) }

func transportBench(b *testing.B, separate bool) {
	var f transportFigures
	raw := newRawEnv(b)
	echo := benchXSK
	if separate {
		echo = benchXSKProcess
	}
	b.Run("raw/echo-poll", func(b *testing.B) { f.rawPoll = echo(b, raw, sleep) })
	b.Run("raw/echo-hybrid", func(b *testing.B) { f.rawHybrid = echo(b, raw, hybrid) })
	b.Run("raw/echo-spin", func(b *testing.B) { f.rawSpin = echo(b, raw, spinYield) })
	b.Run("raw/oneway-64B", func(b *testing.B) { benchOneWay(b, raw, 64, 0) })
	b.Run("raw/oneway-1500B", func(b *testing.B) { f.rawBytes = benchOneWay(b, raw, 1500, 0) })
	b.Run("raw/oneway-jumbo", func(b *testing.B) {
		// The frames afxdp-jumbo sends: 4 KiB UMEM chunks on a 9000-byte MTU.
		f.rawJumboBytes = benchOneWay(b, newRawEnvMTU(b, 9000), jumboFrameLen, 4096)
	})
	// The same sequential calls with no kernel at all: what the rpc layer,
	// the protocol and the reactors cost a round trip on their own, which
	// the targets row weighs against the raw echo.
	b.Run("memlink/sequential", func(b *testing.B) {
		f.memSeq = callsBench(b, newMemEnv(b, benchAuth(envOptions("worker", 1))), 1)
	})
	for _, kind := range []string{"afxdp", "udp", "tcp", "afxdp-jumbo"} {
		b.Run(kind, func(b *testing.B) {
			env := newBenchEnv(b, kind, separate)
			r := f.kind(kind)
			if kind != "afxdp-jumbo" {
				b.Run("sequential", func(b *testing.B) { r.seq = callsBench(b, env, 1) })
				b.Run("inflight32", func(b *testing.B) { r.par = callsBench(b, env, 32) })
			}
			b.Run("tensor16MiB", func(b *testing.B) { r.tensor = tensorBench(b, env) })
		})
	}
	b.Run("targets", f.report)
}

// BenchmarkMemLinkCalls runs the echo calls of BenchmarkTransport over an
// in-memory link in one process: no kernel at all, so it measures what the
// rpc layer, the reactors and the scheduler cost a call on their own.
func BenchmarkMemLinkCalls(b *testing.B) {
	memLinkCalls(b, afxdp.Options{Ticket: testTicket})
}

// memLinkCalls runs sequential and 32-in-flight echo calls between two
// endpoints with opts over an in-memory link.
func memLinkCalls(b *testing.B, opts afxdp.Options) {
	env := newMemEnv(b, opts)
	b.Run("sequential", func(b *testing.B) { callsBench(b, env, 1) })
	b.Run("inflight32", func(b *testing.B) { callsBench(b, env, 32) })
}

// newMemEnv is a client and an echo server on two endpoints with opts
// over an in-memory link.
func newMemEnv(b *testing.B, opts afxdp.Options) *benchEnv {
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	ea, eb := afxdp.NewEndpoint(la, opts), afxdp.NewEndpoint(lb, opts)
	b.Cleanup(func() { ea.Close(); eb.Close() })
	srv := rpc.NewServer()
	srv.Register(methodEcho, echoHandler, rpc.HandlerOptions{Inline: true})
	l, err := afxdprpc.Transport(eb).Listen("")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l)
	b.Cleanup(func() { srv.Close() })
	c := rpc.NewClient(lb.LocalAddr().String(), rpc.ClientOptions{Transport: afxdprpc.Transport(ea)})
	b.Cleanup(func() { c.Close() })
	return &benchEnv{client: c, eps: []*afxdp.Endpoint{ea, eb}}
}
