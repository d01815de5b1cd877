package afxdp

import (
	"sync/atomic"

	"github.com/starwire/starwire/afxdp/protocol"
)

// Stats count what an Endpoint's reactor did. Sessions, HalfOpen and
// Buffered are levels at the time of the call; every other field only
// grows.
type Stats struct {
	Resent     uint64 // packets sent again: found lost, or sent by a timer
	Probes     uint64 // times the tail loss probe or the retransmission timeout fired: each resends a packet (in Resent too) or, when the peer holds it, sends a window probe
	Spurious   uint64 // the peer reported it already had (FlagDsack)
	Duplicates uint64 // data packets received twice
	Malformed  uint64 // datagrams that were not valid protocol packets
	Resets     uint64 // RESETs sent for unknown sessions
	Forwarded  uint64 // packets another reactor of the Group received for this one
	Helped     uint64 // steps another reactor of the process ran for this one while it was parked (help.go)
	Parks      uint64 // times the reactor slept in the link's Wait (parking.go)
	SendErrors uint64 // link flushes that failed (their datagrams are resent)
	Sent       uint64 // packets handed to the link, of which
	Acks       uint64 // ACKs that carried nothing else
	Batches    uint64 // flushes of queued packets to the link (a sendmmsg, or AF_XDP kicks)
	Received   uint64 // datagrams received
	Deferred   uint64 // times a session left a packet for lack of delivery room or memory, closing its window
	Refused    uint64 // OPENs dropped by the session bounds (MaxSessions, MaxPeerSessions)
	// Authentication (auth.go): packets dropped because they failed it.
	Unauthentic uint64 // OPENs with no ticket the endpoint holds, or a MAC that does not check
	Replayed    uint64 // authentic OPENs taken before, or whose clock is out of protocol.OpenSkew
	BadTokens   uint64 // packets of a session without its token
	Expired     uint64 // sessions whose dialer never completed the handshake (HandshakeTimeout)
	Idle        uint64 // sessions closed because their peer stopped answering (IdleTimeout)
	Sessions    uint64 // sessions open now, dialed and accepted
	HalfOpen    uint64 // sessions peers asked for that wait for the handshake to complete
	Buffered    uint64 // bytes held for receivers: frames until Deliver, as announced, and packets past gaps (budget.go)
}

// add sums x into s, field by field.
func (s *Stats) add(x Stats) {
	s.Resent += x.Resent
	s.Probes += x.Probes
	s.Spurious += x.Spurious
	s.Duplicates += x.Duplicates
	s.Malformed += x.Malformed
	s.Resets += x.Resets
	s.Forwarded += x.Forwarded
	s.Helped += x.Helped
	s.Parks += x.Parks
	s.SendErrors += x.SendErrors
	s.Sent += x.Sent
	s.Acks += x.Acks
	s.Batches += x.Batches
	s.Received += x.Received
	s.Deferred += x.Deferred
	s.Refused += x.Refused
	s.Unauthentic += x.Unauthentic
	s.Replayed += x.Replayed
	s.BadTokens += x.BadTokens
	s.Expired += x.Expired
	s.Idle += x.Idle
	s.Sessions += x.Sessions
	s.HalfOpen += x.HalfOpen
	s.Buffered += x.Buffered
}

// counters are an Endpoint's Stats as the reactor keeps them: written by
// the reactor (and a sender holding its loop lock), read by anyone.
// The protocol's own counts (resent, acks...) are in the Env's
// protocol.Counters.
type counters struct {
	malformed, resets, forwarded, sendErrors atomic.Uint64
	helped, parks                            atomic.Uint64
	sent, batches, received                  atomic.Uint64
	refused, expired, sessions, halfOpen     atomic.Uint64
	unauthentic, replayed, badTokens         atomic.Uint64
}

func (c *counters) stats(p *protocol.Counters) Stats {
	return Stats{
		Resent: p.Resent.Load(), Probes: p.Probes.Load(), Spurious: p.Spurious.Load(), Duplicates: p.Duplicates.Load(), Malformed: c.malformed.Load(),
		Resets: c.resets.Load(), Forwarded: c.forwarded.Load(), Helped: c.helped.Load(), Parks: c.parks.Load(), SendErrors: c.sendErrors.Load(),
		Sent: c.sent.Load(), Acks: p.Acks.Load(), Batches: c.batches.Load(), Received: c.received.Load(),
		Deferred: p.Deferred.Load(), Refused: c.refused.Load(), Expired: c.expired.Load(),
		Unauthentic: c.unauthentic.Load(), Replayed: c.replayed.Load(), BadTokens: c.badTokens.Load(),
		Idle: p.Idle.Load(), Sessions: c.sessions.Load(), HalfOpen: c.halfOpen.Load(),
	}
}
