package rpc

import (
	"context"
	"sync"
	"testing"

	"github.com/starwire/starwire/internal/cpuclock"
	"github.com/starwire/starwire/internal/writecount"
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
			cpu0 := cpuclock.Self()
			writecount.Enable()
			w0, f0 := writecount.Read()
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
			b.ReportMetric(float64(cpuclock.Self().Sub(cpu0).Total())/float64(b.N), "cpu-ns/op")
			w1, f1 := writecount.Read()
			b.ReportMetric(float64(f1-f0)/float64(max(w1-w0, 1)), "frames/write")
		})
	}
}
