package afxdprpc_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/starwire/starwire/afxdp"
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
// (Options.InsecureNoAuth). Each mode has its own veth pair and endpoints,
// set up once; the rounds alternate between them, and the ratios logged
// are the medians of each round's ratio, so that load that comes and goes
// on a shared machine weighs on both sides alike:
//
//	go test ./afxdp/afxdprpc -run '^$' -bench 'TransportAuth$' -benchtime 1s
func BenchmarkTransportAuth(b *testing.B) {
	const rounds = 5
	type figures struct{ seq, par, tensor float64 }
	envs := map[string]*benchEnv{}
	got := map[string]*[rounds]figures{}
	for _, m := range authModes {
		benchAuth = m.opts
		envs[m.name] = newBenchEnv(b, "afxdp", false)
		got[m.name] = new([rounds]figures)
	}
	benchAuth = withTicket
	for round := range rounds {
		for _, m := range authModes {
			// A sub-benchmark runs with growing b.N: its last run stays.
			f, env := &got[m.name][round], envs[m.name]
			b.Run(fmt.Sprintf("%s/%d", m.name, round), func(b *testing.B) {
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
		var seq, par, tensor []float64
		for i, t := range got["ticket"] {
			n := got["insecure"][i]
			if n.seq == 0 || n.par == 0 || n.tensor == 0 {
				return // a sub-benchmark was filtered out
			}
			seq, par, tensor = append(seq, t.seq/n.seq), append(par, t.par/n.par), append(tensor, t.tensor/n.tensor)
		}
		b.Logf("ticket/insecure, same run, median (min–max) of %d rounds: sequential calls/s %s, inflight32 calls/s %s, tensor16MiB GB/s %s",
			rounds, spread(seq), spread(par), spread(tensor))
	})
}

// spread formats the median, least and greatest of xs.
func spread(xs []float64) string {
	slices.Sort(xs)
	return fmt.Sprintf("%.3f (%.3f–%.3f)", xs[len(xs)/2], xs[0], xs[len(xs)-1])
}

// BenchmarkMemLinkAuth is BenchmarkMemLinkCalls with and without
// authenticated sessions: no kernel, so the check's share of a call's CPU
// shows most.
func BenchmarkMemLinkAuth(b *testing.B) {
	for _, m := range authModes {
		b.Run(m.name, func(b *testing.B) { memLinkCalls(b, m.opts(afxdp.Options{})) })
	}
}
