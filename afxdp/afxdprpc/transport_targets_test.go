package afxdprpc_test

import "testing"

// transportFigures are the headline figures of one transportBench run:
// each sub-benchmark's last run (the largest b.N) sets its own.
type transportFigures struct {
	rawPoll, rawHybrid, rawSpin echoResult
	rawBytes                    float64     // one-way 1500-byte frame bytes/s
	rawJumboBytes               float64     // one-way jumboFrameLen-byte frame bytes/s
	memSeq                      callsResult // sequential calls over an in-memory link
	kinds                       map[string]*kindFigures
	logged                      bool
}

type kindFigures struct {
	seq, par callsResult
	tensor   float64 // bytes/s
}

func (f *transportFigures) kind(k string) *kindFigures {
	if f.kinds == nil {
		f.kinds = make(map[string]*kindFigures)
	}
	if f.kinds[k] == nil {
		f.kinds[k] = new(kindFigures)
	}
	return f.kinds[k]
}

// report states each target against the figures, as metrics and, once,
// in the log. The sequential targets compare with the raw echo that waits
// as the reactors do: spinning 20µs and then sleeping in poll() (the
// default adaptive polling), spinning without end (*_ENABLE_POLLING=true),
// or sleeping at once (*_ENABLE_POLLING=false); the echo that sleeps at once
// is logged in every case.
func (f *transportFigures) report(b *testing.B) {
	for b.Loop() {
	}
	b.ReportMetric(0, "ns/op")
	x, u := f.kind("afxdp"), f.kind("udp")
	base, mode := f.rawHybrid, "spinning 20µs, then poll() (as the reactors wait)"
	switch o := envOptions("worker", 1); {
	case o.Busy:
		base, mode = f.rawSpin, "spinning (as busy reactors wait)"
	case o.Spin < 0:
		base, mode = f.rawPoll, "in poll() at once (as reactors that never poll wait)"
	}
	if x.seq.rate == 0 || base.rate == 0 || u.seq.rate == 0 || f.rawBytes == 0 {
		return // a sub-benchmark was filtered out
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	seqRate, seqP50 := x.seq.rate/base.rate, x.seq.p50/base.p50
	overUDP, tensor := x.seq.rate/u.seq.rate, x.tensor/f.rawBytes
	b.ReportMetric(100*seqRate, "seq-%raw")
	b.ReportMetric(seqP50, "seq-p50/raw")
	if f.memSeq.p50 > 0 {
		b.ReportMetric((base.p50+f.memSeq.p50)/base.p50, "seq-p50-floor/raw")
	}
	b.ReportMetric(overUDP, "seq/udp")
	b.ReportMetric(x.par.rate, "inflight32-calls/s")
	b.ReportMetric(100*tensor, "tensor-%raw")
	if j := f.kind("afxdp-jumbo").tensor; j > 0 && f.rawJumboBytes > 0 {
		b.ReportMetric(100*j/f.rawJumboBytes, "jumbo-tensor-%raw")
	}
	if f.logged {
		return
	}
	f.logged = true
	b.Logf("targets, from this run; raw echo %s: %.0f round trips/s, p50 %.1fµs", mode, base.rate, base.p50/1e3)
	b.Logf("  (raw echo in poll() at once: %.0f/s, p50 %.1fµs, of which starwire makes %.0f%%, p50 %.2f×; spinning: %.0f/s, p50 %.1fµs)",
		f.rawPoll.rate, f.rawPoll.p50/1e3, 100*x.seq.rate/f.rawPoll.rate, x.seq.p50/f.rawPoll.p50, f.rawSpin.rate, f.rawSpin.p50/1e3)
	b.Logf("  sequential %.0f calls/s = %.0f%% of the raw echo (≥60%%: %s)", x.seq.rate, 100*seqRate, verdict(seqRate >= 0.6))
	b.Logf("  sequential p50 %.1fµs = %.2f× the raw echo's (≤1.3×: %s)", x.seq.p50/1e3, seqP50, verdict(seqP50 <= 1.3))
	if m := f.memSeq.p50; m > 0 {
		// The raw echo's round trip is two kicks, each end taking the
		// frame while the other is still in its sendto; a call adds its
		// software to that, which the in-memory link measures alone.
		b.Logf("    the call's software alone (in-memory link, no kernel) has a p50 of %.1fµs: added to the raw echo's round trip, %.2f× it",
			m/1e3, (base.p50+m)/base.p50)
	}
	if base.sys > 0 {
		b.Logf("    kernel CPU a round trip, both ends: %.1fµs for a call, %.1fµs for the raw echo (two kicks each)",
			x.seq.sys/1e3, base.sys/1e3)
	}
	b.Logf("  sequential = %.2f× starwire over kernel UDP (%.0f calls/s) (≥1.5×: %s)", overUDP, u.seq.rate, verdict(overUDP >= 1.5))
	b.Logf("  32 in flight %.0f calls/s (≥500k: %s); CPU a call, both ends: %.1fµs, of which %.1fµs in the kernel "+
		"(two CPUs have 4µs a call at 500k/s; TCP: %.1fµs, %.1fµs; kernel UDP: %.1fµs, %.1fµs)",
		x.par.rate, verdict(x.par.rate >= 500e3), x.par.cpu/1e3, x.par.sys/1e3,
		f.kind("tcp").par.cpu/1e3, f.kind("tcp").par.sys/1e3, u.par.cpu/1e3, u.par.sys/1e3)
	b.Logf("  16 MiB tensor %.2f GB/s = %.0f%% of raw one-way 1500-byte frames, %.2f GB/s (≥70%%: %s)",
		x.tensor/1e9, 100*tensor, f.rawBytes/1e9, verdict(tensor >= 0.7))
	if j := f.kind("afxdp-jumbo").tensor; j > 0 && f.rawJumboBytes > 0 {
		b.Logf("  9000-byte MTU: 16 MiB tensor %.2f GB/s = %.0f%% of raw one-way %d-byte frames, %.2f GB/s (≥70%%: %s)",
			j/1e9, 100*j/f.rawJumboBytes, jumboFrameLen, f.rawJumboBytes/1e9, verdict(j/f.rawJumboBytes >= 0.7))
	}
}
