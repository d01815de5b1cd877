package bench

import (
	"testing"
)

// echoLoads are the echo benchmarks' loads: one caller, and 32 calls in
// flight on one connection.
var echoLoads = []struct {
	name     string
	inflight int
}{{"seq", 1}, {"inflight32", 32}}

// BenchmarkEcho64 compares 64-byte echo calls of starwire, gRPC-Go and a raw
// TCP baseline (ping-pong for one caller, a pipeline for 32 in flight),
// client and server in this process over loopback. raw-mux is the raw echo
// with one blocking goroutine per call in flight, for reference.
func BenchmarkEcho64(b *testing.B) {
	s := startLoopback(b)
	benchEcho(b, s.Addrs)
}

// benchEcho runs the echo sub-benchmarks against the servers at a and logs
// the targets.
func benchEcho(b *testing.B, a Addrs) {
	var figs figures
	for _, load := range echoLoads {
		b.Run(load.name, func(b *testing.B) {
			b.Run("starwire", func(b *testing.B) {
				c := newRPCClient(b, a.Starwire)
				figs.set(load.name+"/starwire", runCalls(b, load.inflight, warmCalls, func() func() error {
					return echoCall(NewStarwireClient(c))
				}))
			})
			b.Run("grpc", func(b *testing.B) {
				c := newGRPCClient(b, a.GRPC)
				figs.set(load.name+"/grpc", runCalls(b, load.inflight, warmCalls, func() func() error {
					return grpcEchoCall(c)
				}))
			})
			b.Run("raw", func(b *testing.B) {
				figs.set(load.name+"/raw", benchRawEcho(b, a.Raw, load.inflight))
			})
			b.Run("raw-mux", func(b *testing.B) {
				figs.set(load.name+"/raw-mux", benchRawMux(b, a.Raw, load.inflight))
			})
		})
	}
	logTargets([]target{
		{name: "32 in flight: starwire / gRPC-Go ops/s", unit: "×", want: 10,
			measured: ratio(figs.field("inflight32/starwire", opsOf), figs.field("inflight32/grpc", opsOf))},
		{name: "32 in flight: starwire / raw pipelined ops/s", unit: "%", want: 0.40,
			measured: ratio(figs.field("inflight32/starwire", opsOf), figs.field("inflight32/raw", opsOf))},
		{name: "sequential: starwire / raw ping-pong p50", unit: "×", want: 1.5, atMost: true,
			measured: ratio(figs.field("seq/starwire", p50Of), figs.field("seq/raw", p50Of))},
		{name: "(info) 32 in flight: starwire / raw-mux ops/s", unit: "%", info: true,
			measured: ratio(figs.field("inflight32/starwire", opsOf), figs.field("inflight32/raw-mux", opsOf))},
		{name: "(info) 32 in flight: raw-mux / raw pipelined ops/s", unit: "%", info: true,
			measured: ratio(figs.field("inflight32/raw-mux", opsOf), figs.field("inflight32/raw", opsOf))},
		{name: "(info) sequential: starwire / raw-mux p50", unit: "×", info: true,
			measured: ratio(figs.field("seq/starwire", p50Of), figs.field("seq/raw-mux", p50Of))},
		{name: "(info) 32 in flight: CPU per call, starwire / raw", unit: "×", info: true,
			measured: ratio(figs.field("inflight32/starwire", cpuOf), figs.field("inflight32/raw", cpuOf))},
		{name: "(info) 32 in flight: CPU per call, gRPC-Go / starwire", unit: "×", info: true,
			measured: ratio(figs.field("inflight32/grpc", cpuOf), figs.field("inflight32/starwire", cpuOf))},
	})
}

// benchRawEcho measures the raw TCP baseline: ping-pong for one caller, a
// pipeline on one connection for more.
func benchRawEcho(b *testing.B, addr string, inflight int) figure {
	if inflight == 1 {
		e, err := DialRawEcho(addr)
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		req, resp := echoPayload(64), make([]byte, 64)
		return runCalls(b, 1, warmCalls, func() func() error {
			return func() error { return e.Echo(req, resp) }
		})
	}
	p, err := DialRawPipeline(addr)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if err := p.Run(warmCalls, 64, inflight, nil); err != nil {
		b.Fatal(err)
	}
	lat := NewSamples(sampleRoom)
	io0 := readIOCounts()
	cpu0, cpuOK := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	err = p.Run(b.N, 64, inflight, lat)
	b.StopTimer()
	cpu1, cpuOK1 := cpuTime()
	reportSyscalls(b, io0, readIOCounts())
	if err != nil {
		b.Fatal(err)
	}
	f := reportLatency(b, lat)
	if cpuOK && cpuOK1 {
		f.cpu = reportCPU(b, cpu1-cpu0)
	}
	return f
}

// benchRawMux measures the raw echo with one blocking goroutine per call in
// flight (see RawMux): the floor of what any client that wakes one caller
// per answer costs.
func benchRawMux(b *testing.B, addr string, inflight int) figure {
	m, err := DialRawMux(addr, inflight)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	slot := 0
	return runCalls(b, inflight, warmCalls, func() func() error {
		s, req := slot, echoPayload(64)
		slot++
		return func() error { return m.Echo(s, req) }
	})
}
