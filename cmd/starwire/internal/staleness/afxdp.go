package staleness

import (
	"fmt"
	"os"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/afxdpfabric"
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
// veth pair, with an AF_XDP endpoint on both ends of each
// (afxdpfabric.Build). Every peer's connection is dual, as a task's are:
// TCP to the server too, each call over the path faster for its size
// (afxdprpc.Dual, its policy from STARWIRE_AFXDP_PATH).
type xdpFabric struct {
	f   *afxdpfabric.Fabric
	srv *rpc.Server
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
	policy, err := netpath.ParsePolicy(cluster.AFXDPPath())
	if err != nil {
		return nil, fmt.Errorf("staleness: %w", err)
	}
	// Both ends of every link are in this process: a ticket of its own.
	ticket := afxdp.NewTicket()
	const server = "/job:server/replica:0/task:0"
	f, err := afxdpfabric.Build([]string{server}, names, afxdpfabric.Options{Port: xdpPort,
		Endpoint: func(vethnet.End) (link.XSKOptions, afxdp.Options) {
			return link.XSKOptions{}, afxdp.Options{Ticket: &ticket}
		}})
	if err != nil {
		return nil, fmt.Errorf("staleness: afxdp: %w", err)
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
	for _, l := range f.Links {
		ln, err := afxdprpc.Transport(l.PSEP).Listen("")
		if err != nil {
			return nil, err
		}
		go x.srv.Serve(ln)
		dual := f.Dual(&tcp.Transport{}, l.WorkerEP, l.PS, policy, quietLogger)
		x.peers = append(x.peers, xdpPeer{dual, tl.Addr().String()})
	}
	return x, nil
}

func (x *xdpFabric) close() {
	x.srv.Close()
	x.f.Close()
}

// quietLogger keeps the dual connections' choice of path out of the
// report; failures still show.
var quietLogger = logline.New(os.Stderr, "starwire: staleness: ")
