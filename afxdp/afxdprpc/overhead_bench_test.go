package afxdprpc_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// serveOverheadEcho serves an inline echo over tr on loopback and returns
// a client of it over tr.
func serveOverheadEcho(b *testing.B, tr rpc.Transport) *rpc.Client {
	b.Helper()
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := rpc.NewServer()
	s.Register(echo, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	go s.Serve(l)
	b.Cleanup(func() { s.Close() })
	c := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: tr})
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkDualTCPOverhead measures what a dual connection costs a call
// that stays on TCP: sequential 64-byte echoes over a dual transport
// without a packet endpoint (both ends), against the same over plain TCP,
// the two clients taking turns of 200 calls so that the machine's load
// falls on both alike. dual/tcp is the ratio of their median turns' time
// per call.
//
//	go test ./afxdp/afxdprpc -run '^$' -bench DualTCPOverhead -benchtime 20000x
func BenchmarkDualTCPOverhead(b *testing.B) {
	for _, ctxKind := range []string{"background", "cancellable"} {
		b.Run(ctxKind, func(b *testing.B) {
			plain := serveOverheadEcho(b, &tcp.Transport{})
			dual := serveOverheadEcho(b, afxdprpc.Dual(&tcp.Transport{}, nil, afxdprpc.DualOptions{Logger: slog.New(slog.DiscardHandler)}))
			ctx := context.Background()
			if ctxKind == "cancellable" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			req := &rpc.Request{Meta: make([]byte, 64)}
			call := func(c *rpc.Client) {
				var r rpc.Reply
				if err := c.Call(ctx, echo, req, &r); err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
			for range 200 { // connect and warm both
				call(plain)
				call(dual)
			}
			const turn = 200
			var plainTurns, dualTurns []time.Duration
			b.ReportAllocs()
			b.SetBytes(2 * 64)
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(turn, b.N-done)
				for i, c := range []*rpc.Client{plain, dual} {
					start := time.Now()
					for range n {
						call(c)
					}
					per := time.Since(start) / time.Duration(n)
					if i == 0 {
						plainTurns = append(plainTurns, per)
					} else {
						dualTurns = append(dualTurns, per)
					}
				}
				done += n
			}
			b.StopTimer()
			p, d := medianDuration(plainTurns), medianDuration(dualTurns)
			b.ReportMetric(float64(p.Nanoseconds()), "tcp-ns/call")
			b.ReportMetric(float64(d.Nanoseconds()), "dual-ns/call")
			b.ReportMetric(float64(d)/float64(p), "dual/tcp")
		})
	}
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
