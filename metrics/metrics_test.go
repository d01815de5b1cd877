package metrics

import (
	"context"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/cpuclock"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/xdp"
)

var (
	mEcho   = rpc.NewMethod("Echo")
	mTensor = rpc.NewMethod("Tensor")
	mFail   = rpc.NewMethod("Fail")
)

// serve starts a server with m's interceptor over tr and returns a client
// with m's interceptor.
func serve(t *testing.T, m *Metrics, tr rpc.Transport, l rpc.Listener, dial rpc.Transport) *rpc.Client {
	t.Helper()
	srv := rpc.NewServer()
	srv.Interceptors = []rpc.ServerInterceptor{m.ServerInterceptor()}
	srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	srv.Register(mTensor, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		for _, t := range req.Tensors {
			t.Buf = nil // a view: the request outlives the answer's sending
			resp.Tensors = append(resp.Tensors, t)
		}
		return nil
	}, rpc.HandlerOptions{})
	srv.Register(mFail, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		return status.Errorf(wire.NotFound, "no such thing")
	}, rpc.HandlerOptions{Inline: true})
	go srv.Serve(l)
	c := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: dial, Interceptors: []rpc.ClientInterceptor{m.ClientInterceptor()}})
	t.Cleanup(func() { c.Close(); srv.Close() })
	return c
}

// traffic makes n echo calls of 100 bytes, n tensor calls of 4 KiB, and one
// failing call.
func traffic(t *testing.T, c *rpc.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var reply rpc.Reply
	data := make([]byte, 4096)
	for range n {
		if err := c.Call(ctx, mEcho, &rpc.Request{Meta: make([]byte, 100)}, &reply); err != nil {
			t.Fatal(err)
		}
		reply.Release()
		req := rpc.Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{4096}, Data: data}}}
		if err := c.Call(ctx, mTensor, &req, &reply); err != nil {
			t.Fatal(err)
		}
		reply.Release()
	}
	if err := c.Call(ctx, mFail, &rpc.Request{}, &reply); status.CodeOf(err) != wire.NotFound {
		t.Fatalf("Fail: %v", err)
	}
}

type fakeXDP struct{ c xdp.Counters }

func (f fakeXDP) Counters() (xdp.Counters, error) { return f.c, nil }

// scrape fetches url and parses the text exposition format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// value returns the value of the series of family name whose labels
// include want, failing when there is not exactly one.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s in the scrape", name)
	}
	var found []*dto.Metric
	for _, m := range f.Metric {
		ok := true
		for k, v := range want {
			if label(m, k) != v {
				ok = false
			}
		}
		if ok {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d series, want 1 (have %s)", name, want, len(found), seriesOf(f))
	}
	m := found[0]
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	t.Fatalf("%s: unexpected type %v", name, f.GetType())
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func seriesOf(f *dto.MetricFamily) string {
	var out []string
	for _, m := range f.Metric {
		var ls []string
		for _, l := range m.Label {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		out = append(out, "{"+strings.Join(ls, ",")+"}")
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// The interceptors' and collectors' metrics, scraped over HTTP and parsed
// as Prometheus parses them, count exactly the traffic made.
func TestScrapeCountsCalls(t *testing.T) {
	m := New()
	tr := &tcp.Transport{}
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	traffic(t, serve(t, m, tr, l, tr), n)

	// The packet path over an in-memory link that loses packets, so that
	// the reactors retransmit.
	a, b := netip.MustParseAddrPort("198.18.0.1:7000"), netip.MustParseAddrPort("198.18.0.2:7000")
	la, lb := link.MemPair(a, b, link.MemOptions{Loss: 0.05, Seed: 7})
	ea, eb := afxdp.NewEndpoint(la, afxdp.Options{Ticket: &testTicket}), afxdp.NewEndpoint(lb, afxdp.Options{Ticket: &testTicket})
	defer ea.Close()
	defer eb.Close()
	m.AddEndpoint("client", netpath.UDP, ea)
	m.AddEndpoint("server", netpath.UDP, eb)
	m.AddXDP("veth0", fakeXDP{xdp.Counters{Redirected: 10, NotAllowed: 3}})
	pl, err := afxdprpc.Transport(eb).Listen("")
	if err != nil {
		t.Fatal(err)
	}
	traffic(t, serve(t, m, afxdprpc.Transport(eb), pl, afxdprpc.Transport(ea)), n)

	hs, err := m.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	fams := scrape(t, hs.URL())

	for _, side := range []string{"client", "server"} {
		for _, path := range []string{"tcp", "afxdp"} {
			calls := "starwire_" + side + "_calls_total"
			if v := value(t, fams, calls, map[string]string{"method": "Echo", "path": path, "code": "OK"}); v != n {
				t.Errorf("%s Echo over %s: %v calls, want %d", side, path, v, n)
			}
			if v := value(t, fams, calls, map[string]string{"method": "Fail", "path": path, "code": "NotFound"}); v != 1 {
				t.Errorf("%s Fail over %s: %v NotFound, want 1", side, path, v)
			}
			if v := value(t, fams, "starwire_"+side+"_call_duration_seconds", map[string]string{"method": "Tensor", "path": path}); v != n {
				t.Errorf("%s Tensor over %s: %v latencies, want %d", side, path, v, n)
			}
			out, in := "sent", "received"
			if side == "server" {
				out, in = in, out
			}
			if v := value(t, fams, "starwire_"+side+"_"+out+"_bytes_total", map[string]string{"method": "Echo", "path": path, "part": "meta"}); v != 100*n {
				t.Errorf("%s Echo over %s: %v request bytes, want %d", side, path, v, 100*n)
			}
			for _, dir := range []string{out, in} {
				if v := value(t, fams, "starwire_"+side+"_"+dir+"_bytes_total", map[string]string{"method": "Tensor", "path": path, "part": "tensors"}); v != 4096*n {
					t.Errorf("%s Tensor over %s: %v tensor bytes %s, want %d", side, path, v, dir, 4096*n)
				}
			}
		}
		if v := value(t, fams, "starwire_"+side+"_calls_in_flight", map[string]string{"method": "Tensor"}); v != 0 {
			t.Errorf("%s: %v Tensor calls in flight after the traffic, want 0", side, v)
		}
	}
	for _, ep := range []string{"client", "server"} {
		for _, name := range []string{"starwire_afxdp_packets_sent_total", "starwire_afxdp_packets_received_total"} {
			if v := value(t, fams, name, map[string]string{"endpoint": ep, "path": "udp"}); v == 0 {
				t.Errorf("%s{endpoint=%s} = 0 after traffic", name, ep)
			}
		}
	}
	resent := value(t, fams, "starwire_afxdp_retransmissions_total", map[string]string{"endpoint": "client"}) +
		value(t, fams, "starwire_afxdp_retransmissions_total", map[string]string{"endpoint": "server"})
	if want := ea.Stats().Resent + eb.Stats().Resent; resent == 0 || resent > float64(want) {
		t.Errorf("retransmissions %v over a lossy link, want > 0 and <= the endpoints' %d", resent, want)
	}
	if v := value(t, fams, "starwire_xdp_packets_total", map[string]string{"endpoint": "veth0", "verdict": "not_allowed"}); v != 3 {
		t.Errorf("xdp not_allowed = %v, want 3", v)
	}
	if v := value(t, fams, "starwire_xdp_up", map[string]string{"endpoint": "veth0"}); v != 1 {
		t.Errorf("xdp_up = %v, want 1", v)
	}
	if fams["go_goroutines"] == nil {
		t.Error("no Go runtime metrics")
	}
}

// With its series made, the metrics interceptors cost no allocation.
func TestMeteredCallAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are asserted in the run without -race")
	}
	m := New()
	tr := &tcp.Transport{}
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, m, tr, l, tr)
	req := rpc.Request{Meta: make([]byte, 64)}
	var reply rpc.Reply
	call := func() {
		if err := c.Call(context.Background(), mEcho, &req, &reply); err != nil {
			t.Fatal(err)
		}
		reply.Release()
	}
	for range 100 {
		call()
	}
	if n := testing.AllocsPerRun(500, call); n > 0 {
		t.Fatalf("a metered call allocates %v times (both ends)", n)
	}
}

// BenchmarkInterceptorCost runs 64-byte echo calls, 32 in flight, without
// interceptors and with the metrics interceptors on both ends, in one run,
// so the two can be compared as a ratio; cpu-ns/op (both ends' CPU time per
// call) is the steadier figure on a shared machine.
func BenchmarkInterceptorCost(b *testing.B) {
	for _, metered := range []bool{false, true} {
		b.Run(map[bool]string{false: "bare", true: "metrics"}[metered], func(b *testing.B) {
			srv := rpc.NewServer()
			var cics []rpc.ClientInterceptor
			if metered {
				m := New()
				srv.Interceptors = []rpc.ServerInterceptor{m.ServerInterceptor()}
				cics = []rpc.ClientInterceptor{m.ClientInterceptor()}
			}
			srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
				resp.Meta = append(resp.Meta, req.Meta...)
				return nil
			}, rpc.HandlerOptions{Inline: true})
			tr := &tcp.Transport{}
			l, err := tr.Listen("127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go srv.Serve(l)
			defer srv.Close()
			c := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: tr, Interceptors: cics})
			defer c.Close()
			b.ReportAllocs()
			b.SetBytes(128)
			b.SetParallelism(16)
			cpu0 := cpuclock.Self()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req := rpc.Request{Meta: make([]byte, 64)}
				var reply rpc.Reply
				for pb.Next() {
					if err := c.Call(context.Background(), mEcho, &req, &reply); err != nil {
						b.Error(err)
						return
					}
					reply.Release()
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			b.ReportMetric(float64(cpuclock.Self().Sub(cpu0).Total())/float64(b.N), "cpu-ns/op")
		})
	}
}
