package rpc

import (
	"context"
	"fmt"
	"sync"

	"github.com/starwire/starwire/wire"
)

// clientConn is one connection of a Client and its table of calls in
// flight. A call's id is its slot index plus a generation in the high 32
// bits, so an answer to a call that was abandoned and whose slot was reused
// is recognised and dropped.
type clientConn struct {
	c    *Client
	conn Conn
	sem  chan struct{} // one token per call in flight

	mu    sync.Mutex
	calls []*call
	free  []uint32
	err   error // set once the connection has failed
}

func newClientConn(c *Client, conn Conn) *clientConn {
	return &clientConn{c: c, conn: conn, sem: make(chan struct{}, c.opts.MaxInflight)}
}

// call is a slot of the table.
type call struct {
	cc   *clientConn
	idx  uint32
	gen  uint32
	id   uint64
	msg  wire.Message
	done chan struct{} // one token: sent and answered, or sent and abandoned

	// Guarded by cc.mu.
	sent      bool
	answered  bool // an answer or a failure is recorded and its token sent
	receiving bool // Alloc handed out the reply's destinations
	abandoned bool
	in        *wire.Inbound
	err       error
	reply     *Reply
}

func (cc *clientConn) acquire(ctx context.Context) (*call, error) {
	select {
	case cc.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, Errorf(CodeOf(ctx.Err()), "waiting for a call slot: %v", ctx.Err())
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.err != nil {
		<-cc.sem
		return nil, Errorf(wire.Unavailable, "%v", cc.err)
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
	k.gen++
	k.id = uint64(k.gen)<<32 | uint64(k.idx)
	k.sent, k.answered, k.receiving, k.abandoned = false, false, false, false
	k.in, k.err, k.reply = nil, nil, nil
	return k, nil
}

func (cc *clientConn) release(k *call) {
	cc.mu.Lock()
	k.id = 0
	k.msg.Meta, k.msg.Tensors = nil, nil
	k.reply = nil
	cc.free = append(cc.free, k.idx)
	cc.mu.Unlock()
	<-cc.sem
}

// lookup returns the live call with id, or nil.
func (cc *clientConn) lookup(id uint64) *call {
	idx := uint32(id)
	if int(idx) >= len(cc.calls) {
		return nil
	}
	if k := cc.calls[idx]; k.id == id && !k.abandoned && !k.answered {
		return k
	}
	return nil
}

// Sent implements wire.Completion.
func (k *call) Sent(_ *wire.Message, err error) {
	k.cc.mu.Lock()
	k.sent = true
	if err != nil && !k.answered {
		k.answered, k.err = true, Errorf(wire.Unavailable, "send: %v", err)
	}
	wake := k.answered || k.abandoned
	k.cc.mu.Unlock()
	if wake {
		k.done <- struct{}{}
	}
}

// answer records the outcome, in or err, and wakes the caller if the
// request is also sent. The caller holds cc.mu.
func (k *call) answerLocked(in *wire.Inbound, err error) (wake bool) {
	k.in, k.err, k.answered = in, err, true
	return k.sent
}

// wait blocks until the call is answered, or ctx ends, and until the
// transport is done with the request's memory. The caller is woken once,
// when both have happened (or, for an abandoned call, when the request is
// out), since each wake-up costs more than the rest of a small call.
func (k *call) wait(ctx context.Context) error {
	cancelled := ctx.Done()
	if cancelled == nil {
		<-k.done // a plain receive costs less than a select
	} else {
		select {
		case <-k.done:
		case <-cancelled:
			k.abandon(ctx.Err())
		}
	}
	k.cc.mu.Lock()
	defer k.cc.mu.Unlock()
	if k.err != nil {
		if k.in != nil {
			k.in.Release()
		}
		return k.err
	}
	in := k.in
	h := &in.Header
	switch {
	case in.Err != nil:
		err := Errorf(wire.InvalidArgument, "reply: %v", in.Err)
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

// sendCancel tells the server to stop call id; status says why, so the
// handler's context reports the caller's reason.
// abandon gives up on the call because its context ended with cause. It
// returns once the transport no longer reads the request.
func (k *call) abandon(cause error) {
	k.cc.mu.Lock()
	defer k.cc.mu.Unlock()
	if k.answered || k.receiving {
		// The answer is here or landing; its token will come.
		k.cc.mu.Unlock()
		<-k.done
		k.cc.mu.Lock()
		return
	}
	k.abandoned = true
	k.err = Errorf(CodeOf(cause), "%v", cause)
	if k.sent {
		go k.cc.sendCancel(k.id, CodeOf(cause))
		return
	}
	// Sent still reads the request; it wakes us.
	k.cc.mu.Unlock()
	<-k.done
	k.cc.mu.Lock()
}

func (cc *clientConn) sendCancel(id uint64, status wire.Code) {
	cc.conn.Send(&wire.Message{Header: wire.Header{Kind: wire.KindCancel, CallID: id, Status: status}})
}

func (cc *clientConn) receive() {
	err := cc.conn.Receive(cc)
	cc.c.broken(cc, err)
	cc.mu.Lock()
	cc.err = fmt.Errorf("connection to %s lost: %w", cc.c.addr, err)
	for _, k := range cc.calls {
		if k.id != 0 && !k.answered && !k.abandoned && k.answerLocked(nil, Errorf(wire.Unavailable, "%v", cc.err)) {
			k.done <- struct{}{}
		}
	}
	cc.mu.Unlock()
}

// Alloc implements wire.Receiver.
func (cc *clientConn) Alloc(in *wire.Inbound) error {
	if in.Header.Kind != wire.KindResponse || in.Header.Tensors == 0 {
		return nil
	}
	cc.mu.Lock()
	k := cc.lookup(in.Header.CallID)
	var alloc func(*wire.Inbound) error
	if k != nil {
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
func (cc *clientConn) Deliver(in *wire.Inbound) {
	h := &in.Header
	switch h.Kind {
	case wire.KindResponse, wire.KindError:
		cc.mu.Lock()
		idx := uint32(h.CallID)
		if int(idx) < len(cc.calls) {
			if k := cc.calls[idx]; k.id == h.CallID && !k.answered && (!k.abandoned || k.receiving) {
				wake := k.answerLocked(in, nil)
				cc.mu.Unlock()
				if wake {
					k.done <- struct{}{}
				}
				return
			}
		}
		cc.mu.Unlock()
	case wire.KindGoAway:
		cc.c.broken(cc, fmt.Errorf("peer is shutting down"))
	}
	in.Release()
}
