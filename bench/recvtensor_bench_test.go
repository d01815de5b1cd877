package bench

import (
	"context"
	"fmt"
	"testing"
)

// tensorSizes are the RecvTensor-shaped transfers measured.
var tensorSizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"16MiB", 16 << 20}}

// BenchmarkRecvTensor compares fetching a tensor the server holds, one call
// at a time: starwire landing it in pooled buffers and in a preallocated
// destination (Reply.Alloc), gRPC-Go with a bytes message, and raw TCP
// writing the same bytes from the server's buffer.
func BenchmarkRecvTensor(b *testing.B) {
	s := startLoopback(b)
	var figs figures
	for _, size := range tensorSizes {
		b.Run(size.name, func(b *testing.B) {
			b.Run("starwire-pooled", func(b *testing.B) {
				c := NewStarwireClient(newRPCClient(b, s.Addrs.Starwire))
				ctx := context.Background()
				figs.set(size.name+"/starwire-pooled", runTransfer(b, size.n, func() error {
					data, err := c.FetchPooled(ctx, size.n)
					if err == nil && data[size.n-1] != byte((size.n-1)*7+1) {
						err = fmt.Errorf("starwire fetch: wrong last byte %#x", data[size.n-1])
					}
					c.Release()
					return err
				}))
			})
			b.Run("starwire-into", func(b *testing.B) {
				c := NewStarwireClient(newRPCClient(b, s.Addrs.Starwire))
				dst := make([]byte, size.n)
				ctx := context.Background()
				figs.set(size.name+"/starwire-into", runTransfer(b, size.n, func() error {
					return c.FetchInto(ctx, dst)
				}))
			})
			b.Run("grpc", func(b *testing.B) {
				c := newGRPCClient(b, s.Addrs.GRPC)
				ctx := context.Background()
				figs.set(size.name+"/grpc", runTransfer(b, size.n, func() error {
					_, err := c.Fetch(ctx, size.n)
					return err
				}))
			})
			b.Run("raw", func(b *testing.B) {
				f, err := DialRawFetch(s.Addrs.Raw)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				dst := make([]byte, size.n)
				figs.set(size.name+"/raw", runTransfer(b, size.n, func() error { return f.Fetch(dst) }))
			})
		})
	}
	var ts []target
	for _, size := range tensorSizes {
		for _, v := range []string{"starwire-pooled", "starwire-into"} {
			ts = append(ts, target{name: size.name + ": " + v + " allocs/call", unit: "allocs", want: 0, atMost: true,
				measured: figs.field(size.name+"/"+v, allocsOf)})
		}
	}
	ts = append(ts,
		target{name: "16MiB: starwire-into / raw TCP bytes/s", unit: "%", want: 0.90,
			measured: ratio(figs.field("16MiB/starwire-into", bytesOf), figs.field("16MiB/raw", bytesOf))},
		target{name: "16MiB: starwire-into / gRPC-Go bytes/s", unit: "×", want: 3,
			measured: ratio(figs.field("16MiB/starwire-into", bytesOf), figs.field("16MiB/grpc", bytesOf))})
	logTargets(ts)
}

// runTransfer times b.N calls of call moving n bytes each and returns the
// figure with bytes/s and allocations per call.
func runTransfer(b *testing.B, n int, call func() error) figure {
	b.Helper()
	for range 2 {
		if err := call(); err != nil {
			b.Fatalf("warm-up call: %v", err)
		}
	}
	b.SetBytes(int64(n))
	f := runCalls(b, 1, 0, func() func() error { return call })
	f.bytes = float64(n) * f.ops
	return f
}
