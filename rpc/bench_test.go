package rpc

import (
	"context"
	"sync"
	"syscall"
	"testing"
)

// BenchmarkEcho measures 64-byte calls over one loopback connection, one
// caller at a time and with 32 in flight. bench/ compares the same against
// gRPC-Go and raw TCP.
func BenchmarkEcho(b *testing.B) {
	for _, inflight := range []int{1, 32} {
		b.Run(map[int]string{1: "sequential", 32: "inflight32"}[inflight], func(b *testing.B) {
			env := newTestEnv(b)
			payload := make([]byte, 64)
			b.ReportAllocs()
			b.SetBytes(2 * 64)
			cpu0 := cpuTime()
			w0, f0 := TCPWriteStats()
			var wg sync.WaitGroup
			per := b.N / inflight
			b.ResetTimer()
			for g := range inflight {
				n := per
				if g == 0 {
					n += b.N % inflight
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					var reply Reply
					req := Request{Meta: payload}
					for range n {
						if err := env.client.Call(context.Background(), mEcho, &req, &reply); err != nil {
							b.Error(err)
							return
						}
						reply.Release()
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			w1, f1 := TCPWriteStats()
			b.ReportMetric(float64(f1-f0)/float64(max(w1-w0, 1)), "frames/write")
		})
	}
}

// cpuTime is the process's user and system CPU time, in nanoseconds. CPU
// per call is steadier than wall time on a machine shared with other work.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
