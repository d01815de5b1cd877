package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// Label values of the part label: what of a frame the bytes were.
const (
	partMeta    = "meta"
	partTensors = "tensors"
)

// codeNames are the status label's values, gRPC's spellings of TensorFlow's
// codes, so dashboards made for gRPC read them.
var codeNames = [...]string{
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
	"Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
	"Unauthenticated",
}

// side holds the call metrics of one side, client or server.
type side struct {
	calls    *prometheus.CounterVec   // method, path, code
	latency  *prometheus.HistogramVec // method, path
	sent     *prometheus.CounterVec   // method, path, part
	received *prometheus.CounterVec   // method, path, part
	inflight *prometheus.Desc         // method; read from gauges at collect

	// series resolves a method and path to its metrics without locking or
	// allocating; it is replaced, never changed, when one is added.
	series atomic.Pointer[map[seriesKey]*series]
	gauges atomic.Pointer[map[uint32]*inflight]
	mu     sync.Mutex
}

type seriesKey struct {
	method uint32
	path   string
}

// series are the metrics of one method over one path.
type series struct {
	side                  *side
	method, path          string
	latency               prometheus.Observer
	sentMeta, sentTensors prometheus.Counter
	recvMeta, recvTensors prometheus.Counter
	codes                 [len(codeNames)]atomic.Pointer[prometheus.Counter]
}

// latencyBuckets span 10µs to ~42s, doubling: a loopback call to a tensor
// transfer that waits on a step.
var latencyBuckets = prometheus.ExponentialBuckets(10e-6, 2, 23)

func newSide(name string) *side {
	s := &side{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "starwire", Subsystem: name, Name: "calls_total",
			Help: "Calls completed, by method, path and status code.",
		}, []string{"method", "path", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "starwire", Subsystem: name, Name: "call_duration_seconds",
			Help:    "Time from a call's start to its answer (client) or from its arrival to its handler's return (server).",
			Buckets: latencyBuckets,
		}, []string{"method", "path"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "starwire", Subsystem: name, Name: "sent_bytes_total",
			Help: "Bytes sent in requests (client) or answers (server): part=meta the protobuf metadata, part=tensors the raw tensor segments.",
		}, []string{"method", "path", "part"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "starwire", Subsystem: name, Name: "received_bytes_total",
			Help: "Bytes received in answers (client) or requests (server), by part as sent_bytes_total.",
		}, []string{"method", "path", "part"}),
		inflight: prometheus.NewDesc("starwire_"+name+"_calls_in_flight",
			"Calls started and not yet completed, by method.", []string{"method"}, nil),
	}
	s.series.Store(&map[seriesKey]*series{})
	s.gauges.Store(&map[uint32]*inflight{})
	return s
}

func (s *side) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.calls, s.latency, s.sent, s.received, inflightCollector{s}}
}

// inflight counts a method's calls in progress: an integer add per call,
// cheaper than a Gauge's compare-and-swap loop when calls contend.
type inflight struct {
	method string
	n      atomic.Int64
}

// inflightCollector exports a side's in-flight counts.
type inflightCollector struct{ s *side }

func (c inflightCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.s.inflight }

func (c inflightCollector) Collect(ch chan<- prometheus.Metric) {
	for _, g := range *c.s.gauges.Load() {
		ch <- prometheus.MustNewConstMetric(c.s.inflight, prometheus.GaugeValue, float64(g.n.Load()), g.method)
	}
}

// get returns the series of m over path, creating it on first use.
func (s *side) get(m rpc.Method, p netpath.Path) *series {
	path := string(p)
	k := seriesKey{m.ID, path}
	if x := (*s.series.Load())[k]; x != nil {
		return x
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.series.Load()
	if x := old[k]; x != nil {
		return x
	}
	x := &series{
		side: s, method: m.Name, path: path,
		latency:     s.latency.WithLabelValues(m.Name, path),
		sentMeta:    s.sent.WithLabelValues(m.Name, path, partMeta),
		sentTensors: s.sent.WithLabelValues(m.Name, path, partTensors),
		recvMeta:    s.received.WithLabelValues(m.Name, path, partMeta),
		recvTensors: s.received.WithLabelValues(m.Name, path, partTensors),
	}
	next := make(map[seriesKey]*series, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[k] = x
	s.series.Store(&next)
	return x
}

// gauge returns the in-flight count of m, creating it on first use.
func (s *side) gauge(m rpc.Method) *inflight {
	if g := (*s.gauges.Load())[m.ID]; g != nil {
		return g
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.gauges.Load()
	if g := old[m.ID]; g != nil {
		return g
	}
	g := &inflight{method: m.Name}
	next := make(map[uint32]*inflight, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[m.ID] = g
	s.gauges.Store(&next)
	return g
}

// done counts a call that ended with code after d.
func (x *series) done(code wire.Code, d time.Duration) {
	x.latency.Observe(d.Seconds())
	i := int(code)
	if i < 0 || i >= len(x.codes) {
		i = int(wire.Unknown)
	}
	c := x.codes[i].Load()
	if c == nil {
		n := x.side.calls.WithLabelValues(x.method, x.path, codeNames[i])
		x.codes[i].CompareAndSwap(nil, &n)
		c = x.codes[i].Load()
	}
	(*c).Inc()
}

// add adds n to c unless it is 0, which would still cost an atomic add.
func add(c prometheus.Counter, n int) {
	if n > 0 {
		c.Add(float64(n))
	}
}

// codeOf is status.CodeOf without its allocation for a nil error.
func codeOf(err error) wire.Code {
	if err == nil {
		return wire.OK
	}
	return status.CodeOf(err)
}

// tensorBytes sums the tensors' bytes.
func tensorBytes(ts []wire.Tensor) int {
	n := 0
	for i := range ts {
		n += len(ts[i].Data)
	}
	return n
}

// pathNone labels the calls that failed before they had a connection.
const pathNone netpath.Path = "none"

// ClientInterceptor returns an interceptor that counts a Client's calls.
func (m *Metrics) ClientInterceptor() rpc.ClientInterceptor {
	s := m.client
	return func(ctx context.Context, info *rpc.ClientInfo, req *rpc.Request, reply *rpc.Reply, invoke rpc.Invoker) error {
		g := s.gauge(info.Method)
		g.n.Add(1)
		start := time.Now()
		err := invoke(ctx, info, req, reply)
		d := time.Since(start)
		g.n.Add(-1)
		path := info.Path
		if path == "" {
			path = pathNone // failed before it had a connection
		}
		x := s.get(info.Method, path)
		x.done(codeOf(err), d)
		add(x.sentMeta, len(req.Meta))
		add(x.sentTensors, tensorBytes(req.Tensors))
		if err == nil {
			add(x.recvMeta, len(reply.Meta))
			add(x.recvTensors, tensorBytes(reply.Tensors))
		}
		return err
	}
}

// ServerInterceptor returns an interceptor that counts a Server's calls.
func (m *Metrics) ServerInterceptor() rpc.ServerInterceptor {
	s := m.server
	return func(ctx context.Context, info *rpc.ServerInfo, req *wire.Inbound, resp *rpc.Response, next rpc.ServerHandler) error {
		g := s.gauge(info.Method)
		g.n.Add(1)
		start := time.Now()
		err := next(ctx, info, req, resp)
		d := time.Since(start)
		g.n.Add(-1)
		x := s.get(info.Method, info.Path)
		x.done(codeOf(err), d)
		add(x.recvMeta, len(req.Meta))
		add(x.recvTensors, tensorBytes(req.Tensors))
		if err == nil {
			add(x.sentMeta, len(resp.Meta))
			add(x.sentTensors, tensorBytes(resp.Tensors))
		}
		return err
	}
}
