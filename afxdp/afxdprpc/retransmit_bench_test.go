package afxdprpc_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// BenchmarkRetransmits measures how many packets the transport resends per
// thousand it sends, over AF_XDP on a veth pair (copy mode), lossless and
// with 5% of the packets dropped by the steering program on both ends.
// An op is a 4 MiB tensor echoed, then 32 small echo calls in flight at
// once, every answer checked. Reproduce with:
//
//	go test ./afxdp/afxdprpc -run '^$' -bench 'Retransmits$' -benchtime 100x
func BenchmarkRetransmits(b *testing.B) {
	for _, loss := range []float64{0, 0.05} {
		b.Run(fmt.Sprintf("loss=%g", loss), func(b *testing.B) {
			p := netnstest.NewForTest(b, netns.Options{})
			srv, cli, _, _ := xskEndpoints(b, p, link.XSKOptions{Loss: loss}, nil)
			c := serveRPC(b, srv, cli)
			const size = 4 << 20
			data := pattern(size, 3)
			dst := make([]byte, size)
			req := &rpc.Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{size}, Data: data}}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			before := sumStats(srv, cli)
			b.SetBytes(2 * size)
			b.ResetTimer()
			for range b.N {
				var r rpc.Reply
				r.Alloc = func(in *wire.Inbound) error { in.Tensors[0].Data = dst; return nil }
				if err := c.Call(ctx, methodEcho, req, &r); err != nil {
					b.Fatal(err)
				}
				if !bytes.Equal(dst, data) {
					b.Fatal("echoed tensor differs")
				}
				r.Release()
				var wg sync.WaitGroup
				for g := range 32 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var r rpc.Reply
						meta := []byte{byte(g)}
						if err := c.Call(ctx, methodEcho, &rpc.Request{Meta: meta}, &r); err != nil || !bytes.Equal(r.Meta, meta) {
							b.Errorf("call %d: %v %q", g, err, r.Meta)
						}
						r.Release()
					}()
				}
				wg.Wait()
			}
			b.StopTimer()
			after := sumStats(srv, cli)
			sent, resent := after.Sent-before.Sent, after.Resent-before.Resent
			dataPkts := sent - (after.Acks - before.Acks)
			b.ReportMetric(float64(resent), "resent")
			b.ReportMetric(float64(sent)/float64(b.N), "pkts/op")
			b.ReportMetric(1000*float64(resent)/float64(sent), "resent/1kpkt")
			b.ReportMetric(1000*float64(resent)/float64(dataPkts), "resent/1kdata")
		})
	}
}

func sumStats(eps ...*afxdp.Endpoint) afxdp.Stats {
	var t afxdp.Stats
	for _, e := range eps {
		s := e.Stats()
		t.Sent += s.Sent
		t.Acks += s.Acks
		t.Resent += s.Resent
	}
	return t
}
