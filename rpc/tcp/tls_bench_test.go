package tcp

import (
	"context"
	"sync"
	"testing"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// BenchmarkTLS measures what TLS 1.3 costs against plain TCP in the same
// run: 64-byte calls one at a time and 32 in flight, and a 16 MiB tensor
// each way.
func BenchmarkTLS(b *testing.B) {
	dir := b.TempDir()
	ca := newTestCA(b, "bench CA")
	sf, cf := ca.files(b, dir, "server"), ca.files(b, dir, "client")
	scfg, err := sf.ServerConfig()
	if err != nil {
		b.Fatal(err)
	}
	ccfg, err := cf.ClientConfig()
	if err != nil {
		b.Fatal(err)
	}
	for _, sec := range []string{"plain", "tls"} {
		env := func(b *testing.B) (*testEnv, *rpc.Client) {
			if sec == "plain" {
				e := newTestEnv(b)
				return e, e.client
			}
			e := newTestEnvOn(b, &Transport{TLS: scfg})
			c := rpc.NewClient(e.addr, rpc.ClientOptions{Transport: &Transport{TLS: ccfg}})
			b.Cleanup(func() { c.Close() })
			return e, c
		}
		for _, w := range []struct {
			name     string
			inflight int
			size     int
		}{{"seq64", 1, 64}, {"inflight32x64", 32, 64}, {"16MiB", 1, 16 << 20}} {
			b.Run(sec+"/"+w.name, func(b *testing.B) {
				_, c := env(b)
				m, req := mEcho, rpc.Request{Meta: make([]byte, w.size)}
				if w.size > 64 {
					m = mTensor
					req = rpc.Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(w.size)}, Data: make([]byte, w.size)}}}
				}
				b.ReportAllocs()
				b.SetBytes(int64(2 * w.size))
				var wg sync.WaitGroup
				per := b.N / w.inflight
				b.ResetTimer()
				for g := range w.inflight {
					n := per
					if g == 0 {
						n += b.N % w.inflight
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						var reply rpc.Reply
						for range n {
							if err := c.Call(context.Background(), m, &req, &reply); err != nil {
								b.Error(err)
								return
							}
							reply.Release()
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}
