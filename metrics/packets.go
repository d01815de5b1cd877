package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/xdp"
)

// An EndpointStats is an afxdp reactor, or a group of them, whose counters
// are read at each scrape: *afxdp.Endpoint or *afxdp.Group.
type EndpointStats interface {
	Stats() afxdp.Stats
}

// An XDPCounters is a steering program whose verdicts are read at each
// scrape: *xdp.Program.
type XDPCounters interface {
	Counters() (xdp.Counters, error)
}

type endpoint struct {
	name string
	path netpath.Path
	src  EndpointStats
}

type program struct {
	name string
	src  XDPCounters
}

// packetCollector reads the packet path's counters when scraped.
type packetCollector struct {
	mu        sync.Mutex
	endpoints []endpoint
	programs  []program
}

func newPacketCollector() *packetCollector { return &packetCollector{} }

// The packet path's metrics. Their values are the counters afxdp and xdp
// keep; the collector only reads them.
var (
	endpointLabels = []string{"endpoint", "path"}
	afxdpDescs     = []struct {
		desc *prometheus.Desc
		get  func(afxdp.Stats) uint64
	}{
		{newDesc("afxdp_packets_sent_total", "Packets the reactor handed to its link."), func(s afxdp.Stats) uint64 { return s.Sent }},
		{newDesc("afxdp_packets_received_total", "Datagrams the reactor received."), func(s afxdp.Stats) uint64 { return s.Received }},
		{newDesc("afxdp_retransmissions_total", "Packets sent again, after a timeout or a fast retransmit."), func(s afxdp.Stats) uint64 { return s.Resent }},
		{newDesc("afxdp_duplicates_total", "Data packets received twice."), func(s afxdp.Stats) uint64 { return s.Duplicates }},
		{newDesc("afxdp_malformed_total", "Datagrams that were not valid protocol packets."), func(s afxdp.Stats) uint64 { return s.Malformed }},
		{newDesc("afxdp_resets_sent_total", "RESETs sent for unknown sessions."), func(s afxdp.Stats) uint64 { return s.Resets }},
		{newDesc("afxdp_forwarded_total", "Packets another reactor of the group received for this one."), func(s afxdp.Stats) uint64 { return s.Forwarded }},
		{newDesc("afxdp_acks_sent_total", "Acknowledgements sent alone, carrying no data."), func(s afxdp.Stats) uint64 { return s.Acks }},
		{newDesc("afxdp_flushes_total", "Flushes of queued packets to the link (a sendmmsg, or AF_XDP kicks)."), func(s afxdp.Stats) uint64 { return s.Batches }},
		{newDesc("afxdp_send_errors_total", "Link flushes that failed (their packets are resent)."), func(s afxdp.Stats) uint64 { return s.SendErrors }},
		{newDesc("afxdp_unauthentic_opens_total", "OPENs dropped for naming no ticket the endpoint holds or carrying a MAC that does not check."), func(s afxdp.Stats) uint64 { return s.Unauthentic }},
		{newDesc("afxdp_replayed_opens_total", "Authentic OPENs dropped as copies of one taken before or too old."), func(s afxdp.Stats) uint64 { return s.Replayed }},
		{newDesc("afxdp_bad_tokens_total", "Packets dropped for not carrying their session's token."), func(s afxdp.Stats) uint64 { return s.BadTokens }},
	}
	xdpDesc = prometheus.NewDesc("starwire_xdp_packets_total",
		"Packets the XDP steering program saw, by verdict: redirected to an AF_XDP socket, passed to the kernel, no_socket (no socket on the queue), not_allowed (dropped by the allowlist), malformed, impaired (dropped by fault injection).",
		[]string{"endpoint", "verdict"}, nil)
	xdpUpDesc = prometheus.NewDesc("starwire_xdp_up", "1 when the XDP program's counters could be read at this scrape, else 0.", []string{"endpoint"}, nil)
)

func newDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("starwire_"+name, help, endpointLabels, nil)
}

// AddEndpoint exports the counters of an afxdp endpoint or group as
// endpoint=name (unique in m), path=path (netpath.AFXDP or UDP, as afxdp.Open
// says).
func (m *Metrics) AddEndpoint(name string, path netpath.Path, e EndpointStats) {
	c := m.packets
	c.mu.Lock()
	c.endpoints = append(c.endpoints, endpoint{name, path, e})
	c.mu.Unlock()
}

// AddXDP exports the verdict counters of the XDP program feeding the
// endpoint called name.
func (m *Metrics) AddXDP(name string, p XDPCounters) {
	c := m.packets
	c.mu.Lock()
	c.programs = append(c.programs, program{name, p})
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *packetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range afxdpDescs {
		ch <- d.desc
	}
	ch <- xdpDesc
	ch <- xdpUpDesc
}

// Collect implements prometheus.Collector.
func (c *packetCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	eps, progs := c.endpoints, c.programs
	c.mu.Unlock()
	for _, e := range eps {
		s := e.src.Stats()
		for _, d := range afxdpDescs {
			ch <- prometheus.MustNewConstMetric(d.desc, prometheus.CounterValue, float64(d.get(s)), e.name, string(e.path))
		}
	}
	for _, p := range progs {
		n, err := p.src.Counters()
		if err != nil {
			ch <- prometheus.MustNewConstMetric(xdpUpDesc, prometheus.GaugeValue, 0, p.name)
			continue
		}
		ch <- prometheus.MustNewConstMetric(xdpUpDesc, prometheus.GaugeValue, 1, p.name)
		for _, v := range []struct {
			verdict string
			n       uint64
		}{
			{"redirected", n.Redirected}, {"passed", n.Passed}, {"no_socket", n.NoSocket},
			{"not_allowed", n.NotAllowed}, {"malformed", n.Malformed}, {"impaired", n.Impaired},
		} {
			ch <- prometheus.MustNewConstMetric(xdpDesc, prometheus.CounterValue, float64(v.n), p.name, v.verdict)
		}
	}
}
