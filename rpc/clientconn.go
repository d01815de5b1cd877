package rpc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/internal/monoclock"
	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/wire"
)

// clientConn is one connection of a Client and its table of calls in
// flight. A call's id is its slot index plus a generation in the high 32
// bits, so an answer to a call that was abandoned and whose slot was reused
// is recognised and dropped.
type clientConn struct {
	c      *Client
	conn   Conn
	ps     PathSender    // conn, when it chooses a path per message
	path   netpath.Path  // the path of every call otherwise
	sem    chan struct{} // one token per slot in use
	frames atomic.Uint64 // frames received, for keepalive
	ka     *prober

	mu     sync.Mutex
	calls  []*call
	free   []uint32
	active int   // slots in use
	err    error // set once the connection has failed
	kaErr  error // why keepalive closed the connection

	// The read side (see lend), for a connection that can lend it (sr).
	sr       readside.Reader
	resume   chan struct{} // hands the read side back to the receiving goroutine
	reading  readSide
	awaiting int       // answers due: requests sent and not answered
	crowded  bool      // more than one answer was due since none was
	freedAt  time.Time // when the read side was last left to the next caller
	goneAway bool      // the peer said it is shutting down
	swept    bool      // in idleReads; the receiving goroutine's

	// A caller whose context can end reads under watch (see watch): its
	// context's Done is readDone while it holds the read side.
	readDone    <-chan struct{}
	watched     <-chan struct{} // the channel the watcher is to watch
	watcher     bool            // the watcher runs
	rewatch     chan struct{}   // tells the watcher that watched changed
	gone        chan struct{}   // closed once the connection has failed
	interrupted bool            // the watcher interrupted the caller's reads
	lastDone    <-chan struct{} // the last context a caller read under
	afterStop   func() bool     // ends the reading caller's AfterFunc, if it has one
	interruptFn func()          // cc.interruptIfEnded, made once
	// The last call's context could end, and the last answer was longer
	// than such a caller reads (see readside.Reader.ReadTurnUntil): then the
	// next such call is likely to hand the read side back, and the
	// receiving goroutine keeps it.
	lastCancellable, lastLong bool

	// A caller was answered since woke. The read side asks, but both paths
	// of a connection that has two may deliver (see wire.Receiver).
	woken atomic.Bool
	// Callers handed an answer that have not yet taken it (see unrun); a
	// call counted here has counted set.
	waking atomic.Int32
}

// readSide says who reads a connection.
type readSide uint8

const (
	readerReads readSide = iota // the receiving goroutine
	callerReads                 // a caller, for its own answer
	nobodyReads                 // the next call's caller may take it
)

// idleCheck is how long the read side may be left unread before a caller
// that takes it first checks that the peer has not closed the connection
// meanwhile, so that the call goes on a new one instead of failing.
const idleCheck = time.Millisecond

func newClientConn(c *Client, conn Conn) *clientConn {
	cc := &clientConn{c: c, conn: conn, sem: make(chan struct{}, c.opts.MaxInflight), gone: make(chan struct{})}
	cc.ps, _ = conn.(PathSender)
	cc.path = connPath(conn, c.opts.Transport.Name())
	if sr, ok := conn.(readside.Reader); ok && sr.SelfReading() {
		cc.sr, cc.resume = sr, make(chan struct{}, 1)
	}
	cc.ka = startProber(conn, c.opts.Keepalive, &cc.frames, cc.busy, cc.keepaliveFailed)
	return cc
}

// call is a slot of the table.
//
// A caller whose context ends returns at once: a request the transport
// still holds is withdrawn (see Withdrawer), an answer landing in pooled
// buffers is dropped when it arrives. Until those events the slot is a
// zombie, freed by whichever event comes last. Only a transport that cannot
// withdraw, or an answer landing in the caller's own memory (Reply.Alloc),
// makes the caller wait for them.
type call struct {
	cc   *clientConn
	idx  uint32
	gen  uint32
	id   uint64
	msg  wire.Message
	done chan struct{} // a token each time what the caller waits for holds

	// Guarded by cc.mu.
	sent      bool // the transport is done with the request
	answered  bool // an answer or a failure is recorded
	receiving bool // Alloc handed out the reply's destinations
	abandoned bool // the caller gave up
	zombie    bool // the caller is gone; the last event frees the slot
	reads     bool // the caller took the read side to read its answer
	ctxDone   <-chan struct{}
	counted   bool // its answer's token is counted in cc.waking
	want      want // what the caller waits for
	signalled bool // the token for want was sent
	why       wire.Code
	in        *wire.Inbound
	err       error
	reply     *Reply
}

// want is what a caller blocked on a call's token waits for.
type want uint8

const (
	wantAnswer  want = iota // answered
	wantRelease             // sent && !receiving: its memory is its own again
)

// acquire takes a slot for a call about to be sent. When nobody reads the
// connection, the caller takes the read side to read its own answer
// (k.reads); if ctx can end, under watch.
func (cc *clientConn) acquire(ctx context.Context) (*call, error) {
	// A free slot is taken without a two-way select, which locks both
	// channels: most calls find one.
	select {
	case cc.sem <- struct{}{}:
	default:
		select {
		case cc.sem <- struct{}{}:
		case <-ctx.Done():
			return nil, Errorf(CodeOf(ctx.Err()), "waiting for a call slot: %v", ctx.Err())
		}
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.err != nil {
		<-cc.sem
		return nil, Errorf(failCode(cc.err), "%w", cc.err)
	}
	var k *call
	if n := len(cc.free); n > 0 {
		k = cc.calls[cc.free[n-1]]
		cc.free = cc.free[:n-1]
	} else {
		k = &call{cc: cc, idx: uint32(len(cc.calls)), done: make(chan struct{}, 1)}
		k.msg.Done = k
		cc.calls = append(cc.calls, k)
	}
	cc.active++
	k.gen++
	k.id = uint64(k.gen)<<32 | uint64(k.idx)
	k.sent, k.answered, k.receiving, k.abandoned, k.zombie = false, false, false, false, false
	k.want, k.signalled = wantAnswer, false
	k.in, k.err, k.reply = nil, nil, nil
	k.reads, k.ctxDone = false, nil
	cc.awaiting++
	if cc.awaiting > 1 {
		cc.crowded = true
	}
	done := ctx.Done()
	cc.lastCancellable = done != nil
	if cc.sr != nil && cc.reading == nobodyReads {
		if done != nil && cc.lastLong {
			cc.resumeLocked()
		} else {
			cc.reading, k.reads, k.ctxDone = callerReads, true, done
			if done != nil {
				cc.watchLocked(ctx, done)
			}
		}
	}
	return k, nil
}

// send sends a call's request and returns the path that carries it: the
// one the connection chose, when it chooses per message (PathSender).
func (cc *clientConn) send(m *wire.Message) (path netpath.Path, err error) {
	if cc.ps == nil {
		return cc.path, cc.conn.Send(m)
	}
	return cc.ps.SendPath(m)
}

// handBack gives the read side k took back to the receiving goroutine: k's
// request went over a path whose answers arrive elsewhere.
func (cc *clientConn) handBack(k *call) {
	cc.mu.Lock()
	k.reads = false
	cc.unwatchLocked()
	cc.resumeLocked()
	cc.mu.Unlock()
}

// unsent releases the slot of a call whose request was not sent.
func (cc *clientConn) unsent(k *call) {
	cc.mu.Lock()
	cc.awaiting--
	if k.reads {
		k.reads = false
		cc.unwatchLocked()
		cc.resumeLocked()
	}
	cc.releaseLocked(k)
	cc.mu.Unlock()
}

// checkIdle is called before the request of a call that took the read
// side goes out. When the connection has been left unread for a while, it
// first delivers what arrived meanwhile; a connection the peer closed or
// is shutting down fails the call's attempt (errGoneAway), so that the call
// goes on a new one.
func (cc *clientConn) checkIdle(k *call) error {
	cc.mu.Lock()
	idle := time.Since(cc.freedAt) > idleCheck
	cc.mu.Unlock()
	if !idle {
		return nil
	}
	var err error
	stopped := false
	for !stopped {
		if err = cc.sr.Check(); !errors.Is(err, readside.ErrUnread) {
			break
		}
		if k.ctxDone == nil {
			err = cc.sr.ReadTurn(cc)
		} else {
			stopped, err = cc.sr.ReadTurnUntil(cc)
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		// The check fails too once the watcher has interrupted reads.
		stopped, err = interrupted(err)
	}
	if err != nil {
		cc.sr.Fail(err)
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if err == nil && cc.goneAway {
		err = errGoneAway
	}
	if err != nil || stopped {
		// A call whose context ended goes on without the read side and
		// finds out in wait.
		k.reads = false
		cc.unwatchLocked()
		cc.resumeLocked()
	}
	return err
}

// errGoneAway is why a call leaves a connection whose peer is shutting down.
var errGoneAway = errors.New("rpc: peer is shutting down")

// readOwn reads frames, delivering them, until k's answer is in, then
// leaves the read side to the next caller, or hands it back to the
// receiving goroutine when other answers are due. A caller whose context
// ends, or whose answer is longer than readTurnUntil holds, hands it back
// before its answer is in and waits for it in wait.
func (cc *clientConn) readOwn(k *call) {
	var err error
	stopped := false
	for err == nil && !stopped && !cc.answered(k) {
		if k.ctxDone == nil {
			err = cc.sr.ReadTurn(cc)
		} else {
			stopped, err = cc.sr.ReadTurnUntil(cc)
		}
	}
	buffered := cc.sr.Leave()
	if err != nil {
		cc.sr.Fail(err)
	}
	cc.mu.Lock()
	k.reads = false
	cc.woken.Store(false)
	cc.unwatchLocked()
	if err == nil && !stopped && !buffered && cc.awaiting == 0 && cc.err == nil {
		cc.reading = nobodyReads
		cc.freedAt = monoclock.Now()
	} else {
		cc.resumeLocked()
	}
	cc.mu.Unlock()
}

func (cc *clientConn) answered(k *call) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return k.answered
}

// resumeLocked hands the read side back to the receiving goroutine.
func (cc *clientConn) resumeLocked() {
	if cc.reading == readerReads {
		return
	}
	cc.reading = readerReads
	select {
	case cc.resume <- struct{}{}:
	default:
	}
}

func (cc *clientConn) release(k *call) {
	cc.mu.Lock()
	cc.releaseLocked(k)
	cc.mu.Unlock()
}

func (cc *clientConn) releaseLocked(k *call) {
	k.id = 0
	k.msg.Meta, k.msg.Tensors = nil, nil
	k.reply = nil
	cc.free = append(cc.free, k.idx)
	cc.active--
	<-cc.sem
}

// busy reports whether calls are in flight, for keepalive.
func (cc *clientConn) busy() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.active > 0
}

// lookup returns the call with id whose answer is still wanted or still
// landing, or nil.
func (cc *clientConn) lookup(id uint64) *call {
	idx := uint32(id)
	if int(idx) >= len(cc.calls) {
		return nil
	}
	if k := cc.calls[idx]; k.id == id && !k.answered && (!k.abandoned || k.receiving) {
		return k
	}
	return nil
}

// settleLocked frees a zombie's slot, or wakes the caller, once what it
// waits for holds.
func (k *call) settleLocked() {
	if k.settleDue() {
		k.done <- struct{}{}
	}
}

// settleDue is settleLocked without the wake-up: it reports whether the
// caller is to be woken, which its caller does once it has unlocked cc.mu,
// so that callers waiting for the lock do not wait for the wake-up too (it
// may wake a thread). The token's channel has room for it.
func (k *call) settleDue() bool {
	switch {
	case k.zombie:
		if k.sent && !k.receiving {
			k.cc.releaseLocked(k)
		}
	case k.signalled:
	case k.want == wantAnswer && k.answered, k.want == wantRelease && k.sent && !k.receiving:
		k.signalled = true
		return true
	}
	return false
}

// awaitLocked blocks, without cc.mu, until what the caller wants holds.
func (k *call) awaitLocked(w want) {
	k.want, k.signalled = w, false
	k.settleLocked()
	k.cc.mu.Unlock()
	<-k.done
	k.cc.mu.Lock()
}

// Sent implements wire.Completion.
func (k *call) Sent(_ *wire.Message, err error) {
	cc := k.cc
	cc.mu.Lock()
	k.sent = true
	if err != nil && !k.answered && !k.abandoned {
		k.answered, k.err = true, Errorf(failCode(err), "send: %w", err)
	}
	// A request withdrawn in time never gets here; one that went out
	// whole after its caller gave up is cancelled now.
	cancel := k.abandoned && err == nil
	id, why := k.id, k.why
	k.settleLocked()
	cc.mu.Unlock()
	if cancel {
		go cc.sendCancel(id, why)
	}
}

// wait blocks until the call is answered or ctx ends. zombie says that the
// caller must leave the slot to the events still due.
func (k *call) wait(ctx context.Context) (zombie bool, err error) {
	answered := true
	if cancelled := ctx.Done(); cancelled == nil {
		<-k.done // a plain receive costs less than a select
	} else {
		select {
		case <-k.done:
		case <-cancelled:
			answered = false
		}
	}
	cc := k.cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if k.counted {
		k.counted = false
		cc.waking.Add(-1)
	}
	if !answered {
		if !k.answered {
			k.abandonLocked(ctx.Err())
			return k.zombie, k.err
		}
		// The answer came as ctx ended; its token is there.
		<-k.done
	}
	k.reclaimLocked()
	if k.err != nil {
		if k.in != nil {
			k.in.Release()
		}
		return false, k.err
	}
	return false, k.take()
}

// reclaimLocked takes the request back from a transport that still holds
// it although the answer is here: it finishes the batch the request was
// written in before it reports the request sent.
func (k *call) reclaimLocked() {
	if k.sent {
		return
	}
	if w, ok := k.cc.conn.(Withdrawer); ok {
		k.cc.mu.Unlock()
		got := w.Withdraw(&k.msg)
		k.cc.mu.Lock()
		if got == Withdrawn || got == Unsent {
			k.sent = true
		}
	}
	if !k.sent {
		k.awaitLocked(wantRelease)
	}
}

// take hands the answer to the caller's Reply. The caller holds cc.mu.
func (k *call) take() error {
	in := k.in
	h := &in.Header
	switch {
	case in.Err != nil:
		err := Errorf(errCode(in.Err), "reply: %v", in.Err)
		in.Release()
		return err
	case h.Kind == wire.KindError:
		err := Errorf(h.Status, "%s", in.Meta)
		in.Release()
		return err
	}
	k.reply.in, k.reply.Meta, k.reply.Tensors = in, in.Meta, in.Tensors
	return nil
}

// abandonLocked gives up on the call because its context ended with cause.
// It makes the call a zombie unless nothing more is due.
func (k *call) abandonLocked(cause error) {
	cc := k.cc
	k.abandoned = true
	k.why = CodeOf(cause)
	k.err = Errorf(k.why, "%v", cause)
	got := Kept
	if w, ok := cc.conn.(Withdrawer); ok && !k.sent {
		cc.mu.Unlock()
		got = w.Withdraw(&k.msg)
		cc.mu.Lock()
	}
	switch {
	case got == Unsent:
		k.sent = true
		cc.awaiting--
	case got == Withdrawn:
		k.sent = true
		go cc.sendCancel(k.id, k.why)
	case k.sent:
		go cc.sendCancel(k.id, k.why)
	}
	// A transport that keeps the request reads it until Sent; with
	// Reply.Alloc the answer lands in the caller's memory until Deliver.
	if (!k.sent && got == Kept) || (k.receiving && k.reply.Alloc != nil) {
		k.awaitLocked(wantRelease)
	}
	k.reply = nil
	k.zombie = !k.sent || k.receiving
}

func (cc *clientConn) sendCancel(id uint64, status wire.Code) {
	cc.conn.Send(&wire.Message{Header: wire.Header{Kind: wire.KindCancel, CallID: id, Status: status}})
}

func (cc *clientConn) keepaliveFailed(err error) {
	cc.mu.Lock()
	cc.kaErr = err
	cc.mu.Unlock()
	cc.conn.Close()
}

func (cc *clientConn) receive() {
	err := cc.conn.Receive(cc)
	cc.ka.stop()
	cc.mu.Lock()
	if cc.kaErr != nil {
		err = cc.kaErr
	}
	cc.mu.Unlock()
	cc.c.broken(cc, err)
	cc.mu.Lock()
	cc.err = fmt.Errorf("connection to %s lost: %w", cc.c.addr, err)
	close(cc.gone)
	for _, k := range cc.calls {
		if k.id == 0 {
			continue
		}
		k.receiving = false // the transport released what it was filling
		if !k.answered && !k.abandoned {
			k.answered, k.err = true, Errorf(failCode(err), "%w", cc.err)
		}
		k.settleLocked()
	}
	cc.mu.Unlock()
}

func (cc *clientConn) Woke() bool { return cc.woken.Load() && cc.woken.Swap(false) }

// Unrun implements readside.Waker.
func (cc *clientConn) Unrun() bool { return cc.waking.Load() > 0 }

// Alloc implements wire.Receiver.
func (cc *clientConn) Alloc(in *wire.Inbound) error {
	if in.Header.Kind != wire.KindResponse || in.Header.Tensors == 0 {
		return nil
	}
	cc.mu.Lock()
	k := cc.lookup(in.Header.CallID)
	var alloc func(*wire.Inbound) error
	if k != nil && !k.abandoned {
		k.receiving = true
		alloc = k.reply.Alloc
	}
	cc.mu.Unlock()
	if alloc != nil {
		return alloc(in)
	}
	in.AllocPooled()
	return nil
}

// Deliver implements wire.Receiver.
func (cc *clientConn) Deliver(in *wire.Inbound) { cc.deliver(in, false) }

// deliver delivers in; with lend, when in is the last answer due, no other
// was due with it and the last call could read its own answer, it first
// leaves the read side to the next caller, and reports that it did. Calls
// that overlap are left to the receiving goroutine, which reads their
// answers in batches.
func (cc *clientConn) deliver(in *wire.Inbound, lend bool) (lent bool) {
	cc.frames.Add(1)
	h := &in.Header
	switch h.Kind {
	case wire.KindResponse, wire.KindError:
		cc.mu.Lock()
		if cc.awaiting > 0 {
			cc.awaiting--
		}
		cc.lastLong = cc.sr != nil && wire.HeaderSize+h.BodyLen() > cc.sr.WholeLimit()
		if lend && cc.awaiting == 0 && !cc.crowded && cc.err == nil && cc.reading == readerReads && !cc.keepsLong() {
			cc.reading, cc.freedAt, lent = nobodyReads, monoclock.Now(), true
		}
		if cc.awaiting == 0 {
			cc.crowded = false
		}
		if k := cc.lookup(h.CallID); k != nil {
			k.receiving = false
			if !k.abandoned {
				k.answered, k.in = true, in
				wake := k.settleDue()
				if wake && !lent && !k.reads {
					k.counted = true
					cc.waking.Add(1)
				}
				cc.mu.Unlock()
				if wake {
					k.done <- struct{}{}
				}
				if !lent {
					cc.woken.Store(true)
				}
				return lent
			}
			k.settleLocked() // a zombie's answer: dropped
		}
		cc.mu.Unlock()
	case wire.KindPing:
		cc.conn.Send(&wire.Message{Header: wire.Header{Kind: wire.KindPong, CallID: h.CallID}})
	case wire.KindGoAway:
		cc.mu.Lock()
		cc.goneAway = true
		cc.mu.Unlock()
		cc.c.broken(cc, errGoneAway)
	}
	in.Release()
	return lent
}

// MayLend implements readside.Lender.
func (cc *clientConn) MayLend(in *wire.Inbound) bool {
	if cc.sr == nil || (in.Header.Kind != wire.KindResponse && in.Header.Kind != wire.KindError) {
		return false
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	long := wire.HeaderSize+in.Header.BodyLen() > cc.sr.WholeLimit()
	return cc.awaiting == 1 && !cc.crowded && cc.err == nil && !(long && cc.lastCancellable)
}

// keepsLong reports whether the receiving goroutine keeps the read side
// because of a long answer (see lastLong).
func (cc *clientConn) keepsLong() bool { return cc.lastLong && cc.lastCancellable }

// DeliverLending implements readside.Lender.
func (cc *clientConn) DeliverLending(in *wire.Inbound) bool { return cc.deliver(in, true) }

// WaitLent implements readside.Lender.
func (cc *clientConn) WaitLent(closed <-chan struct{}) error {
	if !cc.swept {
		cc.swept = true
		idleReads.add(cc)
	}
	select {
	case <-cc.resume:
		return nil
	case <-closed:
		return ErrClosed
	}
}

// interrupted sorts the error of a turn at the read side: the deadline
// readside.Reader.Interrupt sets ends the turn (os.ErrDeadlineExceeded, the
// error a Go socket read past its deadline returns); any other error fails
// the connection.
func interrupted(err error) (stopped bool, _ error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true, nil
	}
	return false, err
}
