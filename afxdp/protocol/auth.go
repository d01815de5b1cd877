package protocol

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"time"
)

// Who may open a session, and how its packets prove they belong to it.
//
// A listener opens sessions only for dialers holding one of its tickets: a
// random 256-bit secret with a random 64-bit name, handed to the dialer
// over an authenticated channel (package afxdprpc's hello, on the TCP
// connection, which TLS may protect) or configured on both ends. A
// dialer's OPEN carries the ticket's name, the dialer's clock and a MAC
// under the secret over those and the OPEN's identifying fields (the
// session id and the datagram size): OpenAuthLen bytes after the header.
// The listener checks it before it keeps anything for the session, so a
// forged OPEN costs it a map lookup and, for a known ticket name, one MAC.
//
// A replayed OPEN (a copy of a real one, from anywhere) carries a MAC that
// checks. The listener refuses OPENs whose clock is further than
// OpenSkew from its own, and remembers the (ticket, session id) of the
// OPENs it took until their clock leaves that window (Replay): a copy
// comes too late, or finds its original remembered.
//
// Every packet of a session then carries, in its header's Token, a 64-bit
// value derived from the secret, the session id and the OPEN's clock, one
// per direction (Tokens); the receiver compares it with the one it
// expects, one 64-bit comparison per packet, and drops the packet on a
// mismatch. The token is a capability an off-path sender cannot guess
// (2⁻⁶⁴ a try), not a MAC of the data: whoever sees a session's packets
// can forge others. A RESET may carry the token of the packet it answers
// instead, so an endpoint that lost a session (it restarted) can still
// end it for the peer that sent to it.
//
// The MAC is HMAC-SHA256, truncated to 128 bits: it runs once per OPEN and
// once per session (the tokens), never per data packet, so its speed does
// not matter; it is in the standard library (assembly SHA-256 on amd64 and
// arm64), its truncation is standard (RFC 2104, section 5), and it brings
// no dependency.

// Sizes of the authentication fields.
const (
	SecretLen   = 32
	OpenAuthLen = 32 // ticket name u64, clock u64 (Unix ns), MAC 16 bytes
	macLen      = 16
)

// OpenSkew is how far an OPEN's clock may be from the listener's: the
// clocks of hosts that exchange packets must agree within it.
const OpenSkew = 30 * time.Second

// Errors of VerifyOpen.
var (
	// ErrUnauthentic is wrapped when an OPEN carries no ticket, or one
	// the listener does not know, or a MAC that does not check.
	ErrUnauthentic = errors.New("unauthenticated packet")
	// ErrReplayed is wrapped when an OPEN is a copy of one already taken,
	// or its clock is out of OpenSkew.
	ErrReplayed = errors.New("replayed or stale OPEN")
)

// A Ticket lets its holder open sessions with the listener that issued it.
type Ticket struct {
	ID     uint64 // its name, in OPENs; never 0
	Secret [SecretLen]byte
}

// NewTicket returns a ticket with a random name and secret (crypto/rand).
func NewTicket() Ticket {
	var b [8 + SecretLen]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24 on)
	t := Ticket{ID: binary.LittleEndian.Uint64(b[:])}
	copy(t.Secret[:], b[8:])
	if t.ID == 0 {
		t.ID = 1
	}
	return t
}

// String encodes t for a hello: hex, name then secret. It is the secret:
// never log it.
func (t Ticket) String() string {
	var b [8 + SecretLen]byte
	binary.BigEndian.PutUint64(b[:], t.ID)
	copy(b[8:], t.Secret[:])
	return hex.EncodeToString(b[:])
}

// ParseTicket decodes what String encodes.
func ParseTicket(s string) (Ticket, error) {
	var t Ticket
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 8+SecretLen {
		return t, fmt.Errorf("afxdp: ticket: want %d hex digits", 2*(8+SecretLen))
	}
	t.ID = binary.BigEndian.Uint64(b)
	copy(t.Secret[:], b[8:])
	if t.ID == 0 {
		return t, errors.New("afxdp: ticket: name 0")
	}
	return t, nil
}

// A Keyring verifies OPENs under one ticket. It keeps its HMAC state, so
// checking an OPEN allocates nothing; it is not safe for concurrent use.
type Keyring struct {
	t   Ticket
	mac hash.Hash
	sum [sha256.Size]byte
	in  [34]byte // what sign and Tokens MAC, kept here as it escapes to mac
}

// NewKeyring returns a Keyring for t.
func NewKeyring(t Ticket) *Keyring {
	return &Keyring{t: t, mac: hmac.New(sha256.New, t.Secret[:])}
}

// Ticket returns the keyring's ticket.
func (k *Keyring) Ticket() Ticket { return k.t }

// Domain separation of the two uses of the secret.
const (
	openLabel  = 'O'
	tokenLabel = 'T'
)

// sign computes the MAC of an OPEN for session id with datagram size
// size at clock ts into k.sum.
func (k *Keyring) sign(id, size uint64, ts int64) []byte {
	b := k.in[:1+1+8+8+8+8]
	b[0], b[1] = openLabel, packetVersion
	binary.LittleEndian.PutUint64(b[2:], id)
	binary.LittleEndian.PutUint64(b[10:], size)
	binary.LittleEndian.PutUint64(b[18:], k.t.ID)
	binary.LittleEndian.PutUint64(b[26:], uint64(ts))
	k.mac.Reset()
	k.mac.Write(b)
	return k.mac.Sum(k.sum[:0])[:macLen]
}

// Tokens returns the tokens of session id opened at clock ts: the one
// the dialer's packets carry and the one the listener's carry.
func (k *Keyring) Tokens(id uint64, ts int64) (dialer, listener uint64) {
	b := k.in[:1+8+8]
	b[0] = tokenLabel
	binary.LittleEndian.PutUint64(b[1:], id)
	binary.LittleEndian.PutUint64(b[9:], uint64(ts))
	k.mac.Reset()
	k.mac.Write(b)
	sum := k.mac.Sum(k.sum[:0])
	return binary.LittleEndian.Uint64(sum), binary.LittleEndian.Uint64(sum[8:])
}

// SealOpen returns the OpenAuthLen bytes an OPEN for session id, whose
// Offset is size, carries at clock ts.
func (k *Keyring) SealOpen(id, size uint64, ts int64) []byte {
	b := make([]byte, OpenAuthLen)
	binary.LittleEndian.PutUint64(b, k.t.ID)
	binary.LittleEndian.PutUint64(b[8:], uint64(ts))
	copy(b[16:], k.sign(id, size, ts))
	return b
}

// OpenTicket returns the ticket name an OPEN's data names, 0 for none.
func OpenTicket(h *PacketHeader, data []byte) uint64 {
	if h.Type != TypeOpen || len(data) != OpenAuthLen {
		return 0
	}
	return binary.LittleEndian.Uint64(data)
}

// VerifyOpen checks an OPEN's MAC under k, and that its clock is within
// OpenSkew of now; it returns the clock the session's tokens derive from.
// It does not look for replays (Replay does). It allocates nothing, and
// its errors are the bare sentinels, as a flood of forged OPENs must cost
// no more than the check.
func (k *Keyring) VerifyOpen(h *PacketHeader, data []byte, now time.Time) (int64, error) {
	if OpenTicket(h, data) != k.t.ID {
		return 0, ErrUnauthentic
	}
	ts := int64(binary.LittleEndian.Uint64(data[8:]))
	if !hmac.Equal(k.sign(h.Session, h.Offset, ts), data[16:OpenAuthLen]) {
		return 0, ErrUnauthentic
	}
	if d := now.UnixNano() - ts; d > int64(OpenSkew) || d < -int64(OpenSkew) {
		return 0, ErrReplayed
	}
	return ts, nil
}

// Replay remembers the OPENs a listener took while their clock is within
// OpenSkew, so that a copy of one is refused. It holds at most its
// capacity; an OPEN that finds it full of unexpired entries is refused
// too (as a replay: the listener cannot tell), which bounds its memory
// whatever the rate of real OPENs. Not safe for concurrent use.
type Replay struct {
	seen map[replayKey]int64 // expiry, Unix ns
	max  int
}

type replayKey struct{ ticket, session uint64 }

// NewReplay returns a Replay holding at most max OPENs.
func NewReplay(max int) *Replay { return &Replay{seen: make(map[replayKey]int64), max: max} }

// Take records the OPEN of session under ticket at clock ts, or reports
// false when it was taken before (or no room is left).
func (r *Replay) Take(ticket, session uint64, ts int64, now time.Time) bool {
	k := replayKey{ticket, session}
	if _, ok := r.seen[k]; ok {
		return false
	}
	if len(r.seen) >= r.max {
		n := now.UnixNano()
		for key, exp := range r.seen {
			if exp < n {
				delete(r.seen, key)
			}
		}
		if len(r.seen) >= r.max {
			return false
		}
	}
	r.seen[k] = ts + int64(OpenSkew)
	return true
}

// Forget drops what Take recorded for ticket: a revoked ticket opens
// nothing more.
func (r *Replay) Forget(ticket uint64) {
	for key := range r.seen {
		if key.ticket == ticket {
			delete(r.seen, key)
		}
	}
}

// Len returns how many OPENs r remembers.
func (r *Replay) Len() int { return len(r.seen) }

// Authenticate sets the tokens the session's packets carry (tx) and the
// peer's must carry (rx), and, for a dialer, the authentication its OPENs
// carry (SealOpen). Call it before Dial or Start; zeros and nil run the
// session unauthenticated.
func (s *Session) Authenticate(tx, rx uint64, open []byte) {
	s.txToken, s.rxToken, s.openAuth = tx, rx, open
}

// Authentic reports whether h carries the session's token for the peer's
// direction, or, for a RESET, the token of this end's packet it answers.
// The owner drops packets that are not, before Handle. It is one 64-bit
// comparison, which takes the same time whatever bits differ.
func (s *Session) Authentic(h *PacketHeader) bool {
	return h.Token == s.rxToken || (h.Type == TypeReset && h.Token == s.txToken)
}
