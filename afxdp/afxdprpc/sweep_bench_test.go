package afxdprpc_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

var sweepSink = rpc.NewMethod("afxdprpc.test.Sink")

// sweepPolicies are the clients the sweep compares: TCP alone, AF_XDP
// alone, the dual connection choosing per call, and a second TCP-alone
// client, the control: what separates two identical clients on this
// machine is the noise any other ratio here is read against.
var sweepPolicies = [sweepClients]struct {
	name   string
	policy afxdprpc.PathPolicy
}{
	{"tcp", afxdprpc.PathPolicy{Mode: afxdprpc.PathTCPOnly}},
	{"afxdp", afxdprpc.PathPolicy{Mode: afxdprpc.PathAFXDP}},
	{"dual", afxdprpc.PathPolicy{}},
	{"tcp-control", afxdprpc.PathPolicy{Mode: afxdprpc.PathTCPOnly}},
}

// The clients' indexes in sweepPolicies and a round's times.
const (
	sweepTCP = iota
	sweepBypass
	sweepDual
	sweepControl
	sweepClients
)

// BenchmarkDualSizeSweep sends one tensor per call, sequentially, of each
// size from 64 B to 16 MiB, between two network namespaces over one veth
// pair (copy mode), from four clients of one dual server: TCP alone,
// AF_XDP alone, a dual connection in auto mode, and TCP alone again as the
// control. Within a size the clients take turns call by call, in every
// order in turn, so that the load on the machine falls on all alike. Each client's MB/s is at
// its median call; dual/best compares the dual connection with the faster
// path alone round by round (see reportSweep). A fixed count of rounds
// per size gives every size as many paired samples:
//
//	go test ./afxdp/afxdprpc -run '^$' -bench DualSizeSweep -benchtime 60x
func BenchmarkDualSizeSweep(b *testing.B) {
	p := netnstest.NewForTest(b, netns.Options{})
	const port = 7714
	srvG, cliG := openXDPIn(b, p.B, port), openXDPIn(b, p.A, port)
	var addr string
	if err := p.B.Do(func() error {
		tl, err := afxdprpc.Dual(&tcp.Transport{}, srvG, afxdprpc.DualOptions{Path: netpath.AFXDP}).Listen(p.B.Addr.String() + ":0")
		if err != nil {
			return err
		}
		s := rpc.NewServer()
		s.Register(sweepSink, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error { return nil }, rpc.HandlerOptions{Inline: true})
		go s.Serve(tl)
		b.Cleanup(func() { s.Close() })
		addr = tl.Addr().String()
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	clients := make([]*rpc.Client, len(sweepPolicies))
	var dual *afxdprpc.DualTransport
	for i, sp := range sweepPolicies {
		tr := afxdprpc.Dual(&nsTCP{end: p.A}, cliG, afxdprpc.DualOptions{Path: netpath.AFXDP, Policy: sp.policy})
		if i == sweepDual {
			dual = tr
		}
		clients[i] = rpc.NewClient(addr, rpc.ClientOptions{Transport: tr})
		b.Cleanup(func() { clients[i].Close() })
		waitBypass(b, clients[i])
	}
	for size := 64; size <= 16<<20; size *= 4 {
		b.Run(sizeName(size), func(b *testing.B) {
			data := pattern(size, 5)
			req := rpc.Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(size)}, Data: data}}}
			call := func(c *rpc.Client) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				var r rpc.Reply
				if err := c.Call(ctx, sweepSink, &req, &r); err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
			// The dual connection learns the size before it is timed, as
			// a job's connection has long before its thousandth call.
			for range 12 {
				call(clients[sweepDual])
			}
			before := dual.Stats()[0]
			rounds := make([][sweepClients]time.Duration, 0, b.N)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for n := range b.N {
				// Each client follows each of the others as often (the
				// orders run through every permutation): a call just
				// after one over AF_XDP shares the CPUs with its
				// reactors while they still poll.
				var r [sweepClients]time.Duration
				for _, i := range sweepOrders[n%len(sweepOrders)] {
					t0 := time.Now()
					call(clients[i])
					r[i] = time.Since(t0)
				}
				rounds = append(rounds, r)
			}
			b.StopTimer()
			reportSweep(b, size, rounds)
			after := dual.Stats()[0]
			bypassed, tcp := after.AFXDPCalls-before.AFXDPCalls, after.TCPCalls-before.TCPCalls
			b.ReportMetric(float64(bypassed)/float64(max(bypassed+tcp, 1)), "dual-afxdp-share")
			b.Logf("dual: crossover %d, over TCP %v", after.Crossover, after.TCPClasses)
		})
	}
}

// reportSweep reports each client's rate at its median call, and the dual
// connection against the faster path alone two ways: dual/best is the
// median over rounds of the faster path's time over the dual's in the
// same round, so that a round slowed by the machine's other work slows
// both sides of its ratio alike; dual/best-total divides their total
// times, which counts every call, the dual's probes of the slower path
// included. control/tcp is dual/best's measure for two identical TCP
// clients: how far from 1 this machine moves a ratio that should be 1.
func reportSweep(b *testing.B, size int, rounds [][sweepClients]time.Duration) {
	var med [sweepClients]time.Duration
	var total [sweepClients]time.Duration
	for i := range med {
		col := make([]time.Duration, len(rounds))
		for n, r := range rounds {
			col[n] = r[i]
			total[i] += r[i]
		}
		med[i] = median(col)
		b.ReportMetric(float64(size)/max(med[i].Seconds(), 1e-9)/1e6, sweepPolicies[i].name+"-MB/s")
	}
	best := sweepTCP // the faster path alone, by its median call
	if med[sweepBypass] < med[sweepTCP] {
		best = sweepBypass
	}
	b.ReportMetric(pairedRatio(rounds, best, sweepDual), "dual/best")
	b.ReportMetric(total[best].Seconds()/max(total[sweepDual].Seconds(), 1e-9), "dual/best-total")
	b.ReportMetric(pairedRatio(rounds, sweepTCP, sweepControl), "control/tcp")
}

// pairedRatio is the median over rounds of client a's time over client
// b's in the same round: b's speed relative to a's.
func pairedRatio(rounds [][sweepClients]time.Duration, a, b int) float64 {
	ratios := make([]float64, len(rounds))
	for n, r := range rounds {
		ratios[n] = r[a].Seconds() / max(r[b].Seconds(), 1e-9)
	}
	return median(ratios)
}

func median[T time.Duration | float64](v []T) T {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// sweepOrders are the orders in which the clients take turns: every
// permutation, so that each follows each of the others as often.
var sweepOrders = permutations(sweepClients)

func permutations(n int) [][sweepClients]int {
	var out [][sweepClients]int
	var p [sweepClients]int
	var used [sweepClients]bool
	var walk func(k int)
	walk = func(k int) {
		if k == n {
			out = append(out, p)
			return
		}
		for i := range n {
			if !used[i] {
				used[i], p[k] = true, i
				walk(k + 1)
				used[i] = false
			}
		}
	}
	walk(0)
	return out
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// waitBypass calls until the client's connection has its packet session,
// which opens in the background.
func waitBypass(b *testing.B, c *rpc.Client) {
	call := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var r rpc.Reply
		err := c.Call(ctx, sweepSink, &rpc.Request{Meta: []byte("x")}, &r)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
		return string(c.Stats().Path)
	}
	testwait.For(b, 5*time.Second, call, func(p string) bool { return p == string(netpath.AFXDP) }, "an AF_XDP session")
}
