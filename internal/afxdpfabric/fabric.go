package afxdpfabric

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/vethnet"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
)

// OpenEndpoint opens an afxdp endpoint over an AF_XDP socket on interface
// iface (link.OpenXSK with xo), the socket made inside the network
// namespace in runs its function in (nil: the calling thread's); the
// socket stays in that namespace, and the endpoint's reactor needs none.
// The caller closes the endpoint.
func OpenEndpoint(iface string, xo link.XSKOptions, opts afxdp.Options, in func(func() error) error) (*afxdp.Endpoint, error) {
	if in == nil {
		in = func(f func() error) error { return f() }
	}
	var xl *link.XSKLink
	if err := in(func() (err error) {
		xl, err = link.OpenXSK(iface, xo)
		return err
	}); err != nil {
		return nil, err
	}
	return afxdp.NewEndpoint(xl, opts), nil
}

// Options configure Build.
type Options struct {
	// Port is the UDP port of every endpoint; each is on an interface of
	// its own.
	Port uint16
	// Endpoint, when set, gives the options of the endpoint on end e
	// (Port is set over xo's). Nil means the zero options.
	Endpoint func(e vethnet.End) (xo link.XSKOptions, opts afxdp.Options)
}

// A Fabric is the namespaces and veth pairs of a cluster (vethnet.Fabric)
// with an AF_XDP endpoint on both ends of every link. Close it to close
// the endpoints and let the namespaces go.
type Fabric struct {
	Net   *vethnet.Fabric
	Links []Link
	port  uint16
}

// A Link is a veth pair between a worker and a parameter server with the
// endpoint on each end: PSEP on end PS, WorkerEP on end Worker.
type Link struct {
	vethnet.Link
	PSEP, WorkerEP *afxdp.Endpoint
}

// Build makes a namespace for each task of ps and workers, a veth pair
// between every worker and every parameter server (vethnet.Build; it needs
// CAP_NET_ADMIN), and an AF_XDP endpoint on both ends of each.
func Build(ps, workers []string, o Options) (_ *Fabric, err error) {
	n, err := vethnet.Build(ps, workers)
	if err != nil {
		return nil, fmt.Errorf("afxdpfabric: %w", err)
	}
	f := &Fabric{Net: n, port: o.Port}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	open := func(e vethnet.End) (*afxdp.Endpoint, error) {
		var xo link.XSKOptions
		var opts afxdp.Options
		if o.Endpoint != nil {
			xo, opts = o.Endpoint(e)
		}
		xo.Port = o.Port
		ep, err := OpenEndpoint(e.Name, xo, opts, func(fn func() error) error { return n.Do(e.Task, fn) })
		if err != nil {
			return nil, fmt.Errorf("afxdpfabric: AF_XDP on %s of %s: %w", e.Name, e.Task, err)
		}
		return ep, nil
	}
	for _, l := range n.Links {
		fl := Link{Link: l}
		fl.PSEP, err = open(l.PS)
		if err == nil {
			fl.WorkerEP, err = open(l.Worker)
		}
		if fl.PSEP != nil {
			// Kept for Close, whether or not the other end opened.
			f.Links = append(f.Links, fl)
		}
		if err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Packet is the packet address of end e's endpoint, where a dual
// connection from the link's other end opens its packet session.
func (f *Fabric) Packet(e vethnet.End) string {
	return netip.AddrPortFrom(e.Addr, f.port).String()
}

// Dual returns a dual transport (afxdprpc.Dual) whose connections start on
// stream and carry each call over stream or a packet session from near,
// the endpoint on one end of a link, to far, the link's other end, as
// policy chooses. The session opens without a hello: both ends are the
// fabric's. logger may be nil (slog.Default()).
func (f *Fabric) Dual(stream rpc.Transport, near *afxdp.Endpoint, far vethnet.End, policy afxdprpc.PathPolicy, logger *slog.Logger) *afxdprpc.DualTransport {
	return afxdprpc.Dual(stream, near, afxdprpc.DualOptions{Path: netpath.AFXDP, Packet: f.Packet(far), Policy: policy, Logger: logger})
}

// Close closes every endpoint, then lets the namespaces go. An endpoint
// closed already (by a server that served on it) is fine.
func (f *Fabric) Close() error {
	var errs []error
	for _, l := range f.Links {
		for _, ep := range []*afxdp.Endpoint{l.PSEP, l.WorkerEP} {
			if ep != nil {
				errs = append(errs, ep.Close())
			}
		}
	}
	errs = append(errs, f.Net.Close())
	return errors.Join(errs...)
}
