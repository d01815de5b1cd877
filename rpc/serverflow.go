package rpc

import (
	"context"
	"net"
	"net/netip"

	"github.com/starwire/starwire/wire"
)

// Server defaults for the fields of the same names.
const (
	DefaultMaxConns           = 4096
	DefaultMaxConnsPerHost    = 256
	DefaultMaxConcurrentCalls = 4096
	DefaultRecvBudget         = 256 << 20
	DefaultSendBudget         = 64 << 20
)

func (s *Server) maxConns() int {
	if s.MaxConns > 0 {
		return s.MaxConns
	}
	return DefaultMaxConns
}

func (s *Server) maxConnsPerHost() int {
	if s.MaxConnsPerHost > 0 {
		return s.MaxConnsPerHost
	}
	return DefaultMaxConnsPerHost
}

// hostOf is the peer's address without its port, which MaxConnsPerHost
// counts by.
func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap().String()
	}
	return a.String()
}

func (s *Server) maxConcurrentCalls() int32 {
	if s.MaxConcurrentCalls > 0 {
		return int32(s.MaxConcurrentCalls)
	}
	return DefaultMaxConcurrentCalls
}

func (s *Server) recvBudget() int64 {
	if s.RecvBudget > 0 {
		return s.RecvBudget
	}
	return DefaultRecvBudget
}

func (s *Server) sendBudget() int64 {
	if s.SendBudget > 0 {
		return s.SendBudget
	}
	return DefaultSendBudget
}

// Room implements Throttle: a frame may be read while the connection's
// answers waiting to be sent are below the send budget and no call is held
// back for it, and its payload fits the receive budget beside the requests
// held by calls in progress (or nothing is held).
func (sc *serverConn) Room(payload uint64) bool {
	if sc.answering.Load() >= sc.sendBudget || sc.queued.Load() > 0 {
		return false
	}
	held := sc.held.Load()
	return held == 0 || held+int64(payload) <= sc.recvBudget
}

// WaitRoom implements Throttle.
func (sc *serverConn) WaitRoom(payload uint64, closed <-chan struct{}) error {
	for {
		sc.waiting.Store(true)
		if sc.Room(payload) {
			sc.waiting.Store(false)
			return nil
		}
		select {
		case <-sc.room:
		case <-closed:
			sc.waiting.Store(false)
			return ErrClosed
		}
	}
}

// freed is called when a call's request or answer bytes go; it wakes a
// reader waiting for room.
func (sc *serverConn) freed(held, answering int64) {
	if held != 0 {
		sc.held.Add(-held)
	}
	if answering != 0 {
		sc.answering.Add(-answering)
		if sc.reserving.Load() > 0 {
			sc.mu.Lock()
			if sc.budgetFree != nil {
				close(sc.budgetFree)
				sc.budgetFree = nil
			}
			sc.mu.Unlock()
		}
		if sc.queued.Load() > 0 {
			sc.drain(false)
		}
	}
	sc.wakeReader()
}

// wakeReader wakes a reader waiting for room.
func (sc *serverConn) wakeReader() {
	if sc.waiting.Load() {
		select {
		case sc.room <- struct{}{}:
		default:
		}
	}
}

// The answer budget. SendBudget bounds what a connection's answers hold
// before its peer takes them, counted from before they exist where the
// server can:
//
//   - A request that arrives while the connection's answers (waiting to be
//     sent, or reserved by handlers with Response.NewBuffer) are at
//     SendBudget is held back, in arrival order, instead of run: its handler
//     would only make another answer the peer does not take. The reader stops
//     reading the connection meanwhile (Room); a packet transport, whose
//     reactor cannot stop, delivers into the backlog, which MaxConcurrentCalls
//     bounds. Held-back calls start as the answers go, on workers, as many
//     at a time as the largest answer seen on the connection fits in the
//     budget left, and at least one.
//   - A handler on a worker that builds its answer in Response.NewBuffer
//     waits there while the buffer would take the connection's answers past
//     SendBudget, so calls that all arrived before any answer existed still
//     hold at most SendBudget plus one answer.
//
// One answer may always be made when the connection holds none, whatever
// its size, and nothing waits on another connection: a peer that does not
// read its answers holds its own calls back, nobody else's.

// holdBack queues call, tracked among the calls in progress (cancel frames
// reach it, MaxConcurrentCalls counts it), until the connection's answers
// leave room.
func (sc *serverConn) holdBack(call *serverCall, m *method) {
	sc.track(call)
	sc.mu.Lock()
	sc.backlog = append(sc.backlog, job{call, m})
	sc.queued.Add(1)
	sc.mu.Unlock()
	sc.drain(false) // answers may have gone since dispatch looked
}

// drain starts the calls held back that the budget has room for; with
// all, every one of them (the connection has ended: each is answered with
// its context's end).
func (sc *serverConn) drain(all bool) {
	for {
		sc.mu.Lock()
		if len(sc.backlog) == 0 || !all && !sc.roomToStart() {
			sc.mu.Unlock()
			return
		}
		j := sc.backlog[0]
		n := copy(sc.backlog, sc.backlog[1:])
		sc.backlog[n] = job{}
		sc.backlog = sc.backlog[:n]
		left := sc.queued.Add(-1)
		j.call.starting = true
		sc.starting.Add(1)
		sc.mu.Unlock()
		sc.woken.Store(true)
		sc.s.workers.Go(j)
		if left == 0 {
			sc.wakeReader()
		}
	}
}

// roomToStart reports whether a call held back may start: the answers
// held, with those of the calls started and not yet answered counted at
// the largest answer seen, are below the budget; one call at least.
func (sc *serverConn) roomToStart() bool {
	a := sc.answering.Load()
	if a >= sc.sendBudget {
		return false
	}
	n := int64(sc.starting.Load())
	return n == 0 || a+(n+1)*sc.bigAnswer.Load() < sc.sendBudget
}

// reserve counts n answer bytes of call against the connection's budget.
// With wait it first waits, until done closes, while they would take the
// answers held past the budget (unless none are held but call's own).
func (sc *serverConn) reserve(call *serverCall, n int64, wait bool, done <-chan struct{}) bool {
	for {
		a := sc.answering.Load()
		if !wait || a == call.answering || a+n <= sc.sendBudget {
			if sc.answering.CompareAndSwap(a, a+n) {
				call.answering += n
				return true
			}
			continue
		}
		sc.mu.Lock()
		if sc.budgetFree == nil {
			sc.budgetFree = make(chan struct{})
		}
		free := sc.budgetFree
		sc.reserving.Add(1)
		sc.mu.Unlock()
		// Answers that went before the count above woke nobody.
		if a = sc.answering.Load(); a != call.answering && a+n > sc.sendBudget {
			select {
			case <-free:
			case <-done:
				sc.reserving.Add(-1)
				return false
			}
		}
		sc.reserving.Add(-1)
	}
}

// NewBuffer returns a pooled buffer of n bytes for a tensor of the answer
// (set it as the tensor's Buf; the server releases it once the answer is
// sent), counted against the connection's SendBudget from now on, before
// the answer exists. A handler on a goroutine of its own waits here while
// the buffer would take the connection's answers past SendBudget (unless
// it holds none): until its peer takes enough of them, or ctx ends, when
// NewBuffer returns ctx's error and no buffer. A handler on the receiving
// goroutine (Inline, Deferrable) does not wait: the server holds the
// connection's next calls back instead. Outside a server's call it is
// wire.NewBuffer.
func (r *Response) NewBuffer(ctx context.Context, n int) (*wire.Buffer, error) {
	if call := r.call; call != nil && call.sc != nil {
		if !call.sc.reserve(call, int64(n), call.worker, ctx.Done()) {
			return nil, ctx.Err()
		}
	}
	return wire.NewBuffer(n), nil
}

// answerBytes is what a response adds to the bytes waiting to be sent.
func answerBytes(m *wire.Message) int64 {
	n := int64(wire.HeaderSize + len(m.Meta))
	for i := range m.Tensors {
		n += int64(len(m.Tensors[i].Data))
	}
	return n
}
