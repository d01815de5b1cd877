package afxdp

import (
	"errors"
	"sync"
	"time"

	"github.com/starwire/starwire/afxdp/protocol"
)

// Authenticated sessions (protocol/auth.go has the scheme). An endpoint
// takes an OPEN only under one of its tickets: Options.Ticket, given to
// both ends by whoever configures them, and those Issue handed out since
// (package afxdprpc hands one to each TCP connection's peer in its hello,
// and revokes it when the connection ends). A dialer names the ticket it
// holds with DialTicket, or Dial uses Options.Ticket. An OPEN that names
// no ticket the endpoint holds, or carries a MAC that does not check, is
// dropped and counted (Stats.Unauthentic) before anything is kept for it;
// one taken before, or whose clock is out of protocol.OpenSkew, is dropped
// and counted as Stats.Replayed. Every packet of a session then carries
// its direction's token, and one that does not is dropped and counted
// (Stats.BadTokens) before the session sees it.
//
// Options.InsecureNoAuth lets an endpoint dial without a ticket and accept
// OPENs that carry none; such sessions carry zero tokens. Without it, an
// endpoint with no ticket can dial nothing (ErrNoTicket) and accepts
// nothing.

// A Ticket lets its holder open sessions with the endpoints that hold it.
// Its String form is its secret.
type Ticket = protocol.Ticket

// NewTicket returns a ticket with a random name and secret (crypto/rand).
func NewTicket() Ticket { return protocol.NewTicket() }

// ParseTicket decodes a Ticket's String form.
func ParseTicket(s string) (Ticket, error) { return protocol.ParseTicket(s) }

// ErrNoTicket is returned by Dial on an endpoint that holds no ticket and
// is not Options.InsecureNoAuth.
var ErrNoTicket = errors.New("afxdp: no ticket to open sessions with (Options.Ticket, DialTicket), and not Options.InsecureNoAuth")

// replayMemory bounds the OPENs an endpoint (a Group) remembers to refuse
// their copies: with protocol.OpenSkew of 30s, it allows a sustained 2000
// sessions opened a second.
const replayMemory = 1 << 16

// keys are the tickets an endpoint (a Group's endpoints together) takes
// OPENs under, and the OPENs it took. Its mutex is taken once per OPEN.
type keys struct {
	mu       sync.Mutex
	rings    map[uint64]*protocol.Keyring
	replay   *protocol.Replay
	insecure bool
}

func newKeys(o *Options) *keys {
	k := &keys{rings: make(map[uint64]*protocol.Keyring), replay: protocol.NewReplay(replayMemory), insecure: o.InsecureNoAuth}
	if o.Ticket != nil {
		k.rings[o.Ticket.ID] = protocol.NewKeyring(*o.Ticket)
	}
	return k
}

// issue adds a new ticket.
func (k *keys) issue() Ticket {
	t := NewTicket()
	k.mu.Lock()
	defer k.mu.Unlock()
	for k.rings[t.ID] != nil {
		t.ID++
	}
	k.rings[t.ID] = protocol.NewKeyring(t)
	return t
}

// revoke drops ticket id: its holder opens no more sessions (those open
// go on).
func (k *keys) revoke(id uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.rings, id)
	k.replay.Forget(id)
}

// opening is what an authenticated OPEN gives its session.
type opening struct {
	ticket           uint64
	clock            int64
	dialer, listener uint64 // the tokens of each side's packets
}

// check authenticates an OPEN: its MAC and clock, not yet whether it is a
// copy (take). It allocates nothing.
func (k *keys) check(h *protocol.PacketHeader, data []byte, now time.Time) (opening, error) {
	id := protocol.OpenTicket(h, data)
	k.mu.Lock()
	defer k.mu.Unlock()
	if id == 0 && len(data) == 0 && k.insecure {
		return opening{}, nil
	}
	r := k.rings[id]
	if r == nil {
		return opening{}, protocol.ErrUnauthentic
	}
	ts, err := r.VerifyOpen(h, data, now)
	if err != nil {
		return opening{}, err
	}
	o := opening{ticket: id, clock: ts}
	o.dialer, o.listener = r.Tokens(h.Session, ts)
	return o, nil
}

// take records an authenticated OPEN the endpoint is about to keep state
// for, or reports false when it took it before.
func (k *keys) take(session uint64, o opening, now time.Time) bool {
	if o.ticket == 0 {
		return true // insecure: nothing to replay
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.replay.Take(o.ticket, session, o.clock, now)
}

// dialAuth sets up a session this end dials under t (nil: Options.Ticket).
func (e *Endpoint) dialAuth(s *session, t *Ticket) error {
	if t == nil {
		t = e.opts.Ticket
	}
	if t == nil {
		if !e.opts.InsecureNoAuth {
			return ErrNoTicket
		}
		return nil
	}
	r := protocol.NewKeyring(*t)
	ts := time.Now().UnixNano()
	d, l := r.Tokens(s.key.ID, ts)
	s.p.Authenticate(d, l, r.SealOpen(s.key.ID, uint64(e.link.MaxPayload()), ts))
	return nil
}

// Issue returns a new ticket the endpoint takes OPENs under, until Revoke.
// Hand it to one peer over an authenticated channel.
func (e *Endpoint) Issue() Ticket { return e.keys.issue() }

// Revoke stops taking OPENs under ticket id; its sessions go on.
func (e *Endpoint) Revoke(id uint64) { e.keys.revoke(id) }

// Issue returns a new ticket every endpoint of the group takes OPENs
// under, until Revoke.
func (g *Group) Issue() Ticket { return g.keys.issue() }

// Revoke stops taking OPENs under ticket id.
func (g *Group) Revoke(id uint64) { g.keys.revoke(id) }
