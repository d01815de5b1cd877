package xdp

import (
	"net/netip"
	"testing"
)

// BenchmarkAllowlist times the steering program on one starwire packet in
// the kernel (BPF_PROG_TEST_RUN, repeated there), without the allowlist,
// with it and the sender on it, and with it and the sender not on it
// (dropped); the allowlist's cost is the ratio of the first two in the
// same run. No socket is registered, so allowed packets end as no_socket.
func BenchmarkAllowlist(b *testing.B) {
	frame := udpFrame(b, ipA, testPort)
	for _, bc := range []struct {
		name  string
		opts  Options
		allow bool
	}{
		{"off", Options{}, false},
		{"allowed", Options{Allow: []netip.Addr{addrOf([4]byte(ipA.To4()))}}, true},
		{"dropped", Options{Allow: []netip.Addr{addrOf([4]byte(ipC.To4()))}}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bc.opts.Ports = []uint16{testPort}
			p, err := Load(bc.opts)
			if err != nil {
				b.Fatalf("cannot load the program: %v", err)
			}
			defer p.Close()
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			b.ResetTimer()
			_, d, err := p.BPF().Benchmark(frame, b.N, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d.Nanoseconds()), "kernel-ns/packet")
		})
	}
}
