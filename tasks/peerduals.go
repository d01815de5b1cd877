package tasks

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
)

// peerDuals is the transport a task serving AF_XDP (ServeAFXDP) calls its
// peers with when its starwire transport is TCP: a dual connection to each
// peer (afxdprpc.Dual), over TCP to the peer's starwire address and over
// AF_XDP to the same address's UDP port, where every task of the cluster
// serves its endpoint. Each call goes whole over the path the policy picks
// for its size, so the calls that AF_XDP carries slower on a link (on veth
// in copy mode, tensors of some kilobytes and more) stay on TCP, where
// AF_XDP alone carried them all.
type peerDuals struct {
	tcp    *tcp.Transport
	ep     *afxdp.Endpoint
	policy afxdprpc.PathPolicy
	// logger, set by Start before the task dials a peer, is the dual
	// connections'.
	logger *slog.Logger

	mu    sync.Mutex
	duals map[string]*afxdprpc.DualTransport // by the peer's address
}

func newPeerDuals(tr *tcp.Transport, ep *afxdp.Endpoint, policy afxdprpc.PathPolicy) *peerDuals {
	return &peerDuals{tcp: tr, ep: ep, policy: policy, duals: make(map[string]*afxdprpc.DualTransport)}
}

// errDialOnly says that peerDuals serves nothing: the task serves on its
// starwire listener and its AF_XDP endpoint's.
var errDialOnly = errors.New("tasks: the peers' dual transport only dials")

// Name implements rpc.Transport.
func (p *peerDuals) Name() string { return "dual" }

// Dial implements rpc.Transport: addr is the peer's starwire address, over
// TCP and, as ip:port, over AF_XDP.
func (p *peerDuals) Dial(ctx context.Context, addr string) (rpc.Conn, error) {
	return p.dual(addr).Dial(ctx, addr)
}

// Listen implements rpc.Transport.
func (p *peerDuals) Listen(string) (rpc.Listener, error) { return nil, errDialOnly }

// dual returns the dual transport to the peer at addr, made on first use:
// a dual transport knows one peer's packet endpoint.
func (p *peerDuals) dual(addr string) *afxdprpc.DualTransport {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.duals[addr]
	if d == nil {
		d = afxdprpc.Dual(p.tcp, p.ep, afxdprpc.DualOptions{Path: netpath.AFXDP, Packet: addr, Policy: p.policy, Logger: p.logger})
		p.duals[addr] = d
	}
	return d
}

// totals returns, for each peer dialed, what its dual connections carried
// over each path, in the order of the peers' addresses.
func (p *peerDuals) totals() []afxdprpc.PathStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]afxdprpc.PathStats, 0, len(p.duals))
	for addr, d := range p.duals {
		st := d.Totals()
		st.Peer = addr
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b afxdprpc.PathStats) int { return strings.Compare(a.Peer, b.Peer) })
	return out
}
