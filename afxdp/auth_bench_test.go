package afxdp_test

import (
	"fmt"
	"testing"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/rpc"
)

// benchAuth gives the transport benchmark's endpoints their
// authentication: testTicket, unless BenchmarkTransportAuth runs them
// without.
var benchAuth = withTicket

func insecure(o afxdp.Options) afxdp.Options {
	o.InsecureNoAuth = true
	return o
}

// authModes are the two sides of the comparison, in the order they run.
var authModes = []struct {
	name string
	opts func(afxdp.Options) afxdp.Options
}{{"ticket", withTicket}, {"insecure", insecure}}

// BenchmarkTransportAuth measures what authenticated sessions cost the
// packet path: starwire over AF_XDP between two namespaces, as
// BenchmarkTransport runs it, with sessions under a ticket (every packet
// carries and is checked for its session's token) and without
// (Options.InsecureNoAuth), each twice, alternating, and logs the ratios of
// the two within this run:
//
//	go test ./afxdp -run '^$' -bench 'TransportAuth$' -benchtime 1s
func BenchmarkTransportAuth(b *testing.B) {
	defer func() { benchAuth = withTicket }()
	type figures struct{ seq, par, tensor float64 }
	const rounds = 2
	got := map[string]*[rounds]figures{}
	for round := range rounds {
		for _, m := range authModes {
			if got[m.name] == nil {
				got[m.name] = new([rounds]figures)
			}
			// A sub-benchmark runs with growing b.N: its last run stays.
			f := &got[m.name][round]
			b.Run(fmt.Sprintf("%s/%d", m.name, round), func(b *testing.B) {
				benchAuth = m.opts
				env := newBenchEnv(b, "afxdp", false)
				b.Run("sequential", func(b *testing.B) { f.seq = callsBench(b, env, 1).rate })
				b.Run("inflight32", func(b *testing.B) { f.par = callsBench(b, env, 32).rate })
				b.Run("tensor16MiB", func(b *testing.B) { f.tensor = tensorBench(b, env) })
			})
		}
	}
	b.Run("ratios", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(0, "ns/op")
		sum := func(name string) (s figures) {
			for _, f := range got[name] {
				s.seq, s.par, s.tensor = s.seq+f.seq, s.par+f.par, s.tensor+f.tensor
			}
			return s
		}
		t, n := sum("ticket"), sum("insecure")
		if n.seq == 0 || n.par == 0 || n.tensor == 0 {
			return // a sub-benchmark was filtered out
		}
		b.Logf("ticket/insecure, same run, %d rounds each: sequential calls/s %.3f, inflight32 calls/s %.3f, tensor16MiB GB/s %.3f",
			rounds, t.seq/n.seq, t.par/n.par, t.tensor/n.tensor)
	})
}

// BenchmarkMemLinkAuth is BenchmarkMemLinkCalls with and without
// authenticated sessions: no kernel, so the check's share of a call's CPU
// shows most.
func BenchmarkMemLinkAuth(b *testing.B) {
	for _, m := range authModes {
		b.Run(m.name, func(b *testing.B) {
			la, lb := link.MemPair(memA, memB, link.MemOptions{})
			ea, eb := afxdp.NewEndpoint(la, m.opts(afxdp.Options{})), afxdp.NewEndpoint(lb, m.opts(afxdp.Options{}))
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
			env := &benchEnv{client: c, eps: []*afxdp.Endpoint{ea, eb}}
			b.Run("sequential", func(b *testing.B) { callsBench(b, env, 1) })
			b.Run("inflight32", func(b *testing.B) { callsBench(b, env, 32) })
		})
	}
}
