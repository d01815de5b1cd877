package protocol

import (
	"errors"
	"fmt"

	"github.com/starwire/starwire/wire"
)

// frameParser rebuilds frames from a session's in-order packet stream. A
// frame's first packet holds its header whole, which says how much memory
// the frame takes (budget.go); the metadata and descriptors are gathered
// next; then the Receiver's Alloc says where the tensor bytes go, and every
// later packet's data is copied straight there.
type frameParser struct {
	msg    uint32 // number of the frame being rebuilt (or next)
	active bool   // inside a frame
	off    uint64 // frame bytes received so far
	in     *wire.Inbound
	body   []byte // Begin's room for metadata and descriptors
	bodyN  int
	payN   uint64 // payload bytes received
	// The destination the next payload byte goes to: tensor ti, byte
	// toff, so a packet finds it without scanning the frame's tensors.
	ti    int
	toff  int
	skip  bool   // Alloc failed: the payload is read and dropped
	ready bool   // header and body parsed, destinations known
	drop  uint64 // bytes left of a frame too large, read and dropped
	// claim is the memory reserved for the frame being rebuilt, or for
	// the frames of a packed packet (budget.go); a frame's share moves to
	// it when it completes, and is released when it is handed on.
	claim int64
}

// errNoRoom is returned by feed for a frame's first packet when the memory
// the frame announces is not available now; nothing was taken.
var errNoRoom = errors.New("no memory for the frame now")

// feed takes the data of the next packet in order and returns the frame it
// completes, if any. A frame's first packet reserves what its head
// announces when reserve is set, and the frame holds it (errNoRoom when it
// does not fit); a packed packet's frames were paid for together.
func (p *frameParser) feed(h *PacketHeader, data []byte, s *Session, reserve bool) (*wire.Inbound, error) {
	if h.Flags&FlagFirst != 0 {
		if p.active {
			return nil, fmt.Errorf("frame %d starts inside frame %d: %w", h.Msg, p.msg, ErrProtocol)
		}
		if h.Msg != p.msg {
			return nil, fmt.Errorf("frame %d starts where frame %d was due: %w", h.Msg, p.msg, ErrProtocol)
		}
		wh, claim, tooLarge, err := s.frameClaim(h, data)
		if err != nil {
			return nil, err
		}
		if reserve {
			if tooLarge == nil && s.adm != nil && !s.adm.Admit(wh.PayloadLen) {
				return nil, errNoRoom
			}
			if !s.reserve(claim) {
				return nil, errNoRoom
			}
			p.claim += claim
		}
		p.active, p.off, p.payN, p.bodyN, p.skip, p.ready = true, wire.HeaderSize, 0, 0, false, false
		p.ti, p.toff, p.drop = 0, 0, 0
		p.in = wire.NewInbound()
		if tooLarge != nil {
			// Read to its end and dropped, delivered bare with the
			// error, so that its call alone fails, as on TCP.
			bare := wire.Header{Kind: wh.Kind, Method: wh.Method, Status: wh.Status, CallID: wh.CallID, Timeout: wh.Timeout}
			p.in.Begin(&bare)
			p.in.Err = tooLarge
			p.drop, p.ready, p.skip = wh.BodyLen(), true, true
		} else if p.body = p.in.Begin(&wh); len(p.body) == 0 {
			p.allocate(s.up)
		}
		data = data[wire.HeaderSize:]
	} else if !p.active || h.Msg != p.msg || h.Offset != p.off {
		return nil, fmt.Errorf("packet %d of frame %d at offset %d, expected frame %d offset %d: %w",
			h.Seq, h.Msg, h.Offset, p.msg, p.off, ErrProtocol)
	}
	p.off += uint64(len(data))
	for len(data) > 0 {
		switch {
		case p.drop > 0: // a frame too large, dropped whole
			n := min(uint64(len(data)), p.drop)
			p.drop -= n
			data = data[n:]
		case !p.ready: // metadata and descriptors
			n := copy(p.body[p.bodyN:], data)
			p.bodyN += n
			data = data[n:]
			if p.bodyN == len(p.body) {
				p.allocate(s.up)
			}
		default: // tensor bytes, into their destinations
			left := p.in.Header.PayloadLen - p.payN
			if uint64(len(data)) > left {
				return nil, fmt.Errorf("frame %d: %d bytes past its end: %w", h.Msg, uint64(len(data))-left, ErrProtocol)
			}
			if p.skip {
				p.payN += uint64(len(data))
				data = nil
				continue
			}
			ts := p.in.Tensors
			for p.ti < len(ts) && p.toff == len(ts[p.ti].Data) {
				p.ti, p.toff = p.ti+1, 0
			}
			if p.ti == len(ts) {
				// CheckAlloc made the destinations add up to the
				// payload, so this cannot happen; the loop would spin.
				return nil, fmt.Errorf("frame %d: no destination for payload byte %d: %w", h.Msg, p.payN, ErrProtocol)
			}
			n := copy(ts[p.ti].Data[p.toff:], data)
			p.toff += n
			p.payN += uint64(n)
			data = data[n:]
		}
	}
	if h.Flags&FlagLast == 0 {
		return nil, nil
	}
	if p.in == nil || !p.ready || p.drop != 0 || p.payN != p.in.Header.PayloadLen {
		return nil, fmt.Errorf("frame %d ends after %d bytes, short of its length: %w", h.Msg, p.off, ErrProtocol)
	}
	in := p.in
	p.in, p.body, p.active = nil, nil, false
	p.msg++
	p.claim -= ClaimOf(in) // the frame's, until Deliver takes it
	return in, nil
}

// allocate parses the descriptors and asks the receiver for destinations
// (pooled buffers for a frame that arrives before Receive names one). A
// failure is the frame's, not the session's: the payload is dropped and
// the frame delivered with in.Err set, as the stream transport does.
func (p *frameParser) allocate(up Upper) {
	p.ready = true
	r := up.Receiver()
	if r == nil {
		r = pooled{}
	}
	if p.in.Prepare(r) != nil {
		p.skip = true
	}
}

// pooled is the receiver of frames that arrive before Receive: their
// tensors land in pooled buffers.
type pooled struct{}

func (pooled) Alloc(in *wire.Inbound) error { in.AllocPooled(); return nil }
func (pooled) Deliver(in *wire.Inbound)     { in.Release() }

// reset drops a partly received frame and returns the memory it had
// reserved.
func (p *frameParser) reset() (claim int64) {
	if p.in != nil {
		p.in.Release()
		p.in = nil
	}
	p.active = false
	claim, p.claim = p.claim, 0
	return claim
}
