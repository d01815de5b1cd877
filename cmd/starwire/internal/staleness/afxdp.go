package staleness

import (
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/logline"
	"github.com/starwire/starwire/internal/vethnet"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
)

// xdpPort is the UDP port of every AF_XDP endpoint; each is on its own
// interface.
const xdpPort = 7701

// xdpFabric is the AF_XDP layout of a run: the parameter server in a
// namespace of its own, joined to the trainer and to every worker by a
// veth pair, with an AF_XDP endpoint on both ends of each. Every peer's
// connection is dual, as a task's are: TCP to the server too, each call
// over the path faster for its size (afxdprpc.Dual, its policy from
// STARWIRE_AFXDP_PATH).
type xdpFabric struct {
	f       *vethnet.Fabric
	closers []io.Closer
	srv     *rpc.Server
	// peers[i] dials the server: a transport and the server's address on
	// the peer's own link.
	peers []xdpPeer
}

type xdpPeer struct {
	tr   rpc.Transport
	addr string
}

// startAFXDP serves st over AF_XDP to n peers (the trainer, then the
// workers).
func startAFXDP(st *store, n int) (_ *xdpFabric, err error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("/job:peer/replica:0/task:%d", i)
	}
	const server = "/job:server/replica:0/task:0"
	f, err := vethnet.Build([]string{server}, names)
	if err != nil {
		return nil, fmt.Errorf("staleness: afxdp: %w", err)
	}
	policy, err := netpath.ParsePolicy(cluster.AFXDPPath())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("staleness: %w", err)
	}
	x := &xdpFabric{f: f, srv: newStarServer(st)}
	defer func() {
		if err != nil {
			x.close()
		}
	}()
	tl, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("staleness: afxdp: %w", err)
	}
	go x.srv.Serve(tl)
	// Both ends of every link are in this process: a ticket of its own.
	ticket := afxdp.NewTicket()
	open := func(e vethnet.End) (*afxdp.Endpoint, error) {
		var xl *link.XSKLink
		if err := f.Do(e.Task, func() (err error) {
			xl, err = link.OpenXSK(e.Name, link.XSKOptions{Port: xdpPort})
			return err
		}); err != nil {
			return nil, fmt.Errorf("staleness: afxdp on %s: %w", e.Name, err)
		}
		ep := afxdp.NewEndpoint(xl, afxdp.Options{Ticket: &ticket})
		x.closers = append(x.closers, ep)
		return ep, nil
	}
	for _, l := range f.Links {
		sep, err := open(l.PS)
		if err != nil {
			return nil, err
		}
		ln, err := afxdprpc.Transport(sep).Listen("")
		if err != nil {
			return nil, err
		}
		go x.srv.Serve(ln)
		cep, err := open(l.Worker)
		if err != nil {
			return nil, err
		}
		dual := afxdprpc.Dual(&tcp.Transport{}, cep, afxdprpc.DualOptions{Path: netpath.AFXDP,
			Packet: netip.AddrPortFrom(l.PS.Addr, xdpPort).String(), Policy: policy, Logger: quietLogger})
		x.peers = append(x.peers, xdpPeer{dual, tl.Addr().String()})
	}
	return x, nil
}

func (x *xdpFabric) close() {
	x.srv.Close()
	for _, c := range x.closers {
		c.Close()
	}
	x.f.Close()
}

// quietLogger keeps the dual connections' choice of path out of the
// report; failures still show.
var quietLogger = logline.New(os.Stderr, "starwire: staleness: ")
