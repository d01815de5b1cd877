package rpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/wire"
)

// serverConn serves one connection: its Receive loop delivers frames here.
type serverConn struct {
	s     *Server
	conn  Conn
	clock DeliveryClock // conn, when it tells the time of a delivery; nil otherwise
	host  string        // the peer's address without its port
	peer  net.Addr
	path  netpath.Path // for interceptors
	ka    *prober

	recvBudget, sendBudget int64
	maxCalls               int32
	held                   atomic.Int64 // request payload bytes of calls in progress
	answering              atomic.Int64 // answer bytes waiting to be sent
	running                atomic.Int32 // calls on goroutines
	frames                 atomic.Uint64
	waiting                atomic.Bool   // the reader waits for room
	room                   chan struct{} // wakes it
	woken                  atomic.Bool   // a call went to a worker since woke; both paths of a two-path connection set it

	// The answer budget (serverflow.go): calls held back while the
	// connection's answers are at SendBudget, handlers waiting for room
	// for their answers' buffers.
	queued     atomic.Int32  // len(backlog)
	starting   atomic.Int32  // calls taken from the backlog not yet answered
	bigAnswer  atomic.Int64  // the largest answer seen on the connection
	reserving  atomic.Int32  // handlers waiting in Response.NewBuffer
	backlog    []job         // under mu
	budgetFree chan struct{} // under mu; closed when answer bytes go, for reserving

	mu       sync.Mutex
	inflight map[uint64]*serverCall // calls on goroutines, for cancel frames
}

func newServerConn(s *Server, c Conn) *serverConn {
	sc := &serverConn{
		s: s, conn: c, host: hostOf(c.RemoteAddr()), peer: c.RemoteAddr(), path: serverConnPath(c), inflight: make(map[uint64]*serverCall),
		recvBudget: s.recvBudget(), sendBudget: s.sendBudget(), maxCalls: s.maxConcurrentCalls(),
		room: make(chan struct{}, 1),
	}
	sc.clock, _ = c.(DeliveryClock)
	return sc
}

// busy reports whether the connection has calls in progress, for keepalive.
func (sc *serverConn) busy() bool { return sc.running.Load() > 0 || sc.answering.Load() > 0 }

func (sc *serverConn) serve() {
	sc.ka = startProber(sc.conn, sc.s.Keepalive, &sc.frames, sc.busy, func(err error) {
		sc.s.logger().Warn("rpc: closing connection", "peer", sc.conn.RemoteAddr(), "err", err)
		sc.conn.Close()
	})
	err := sc.conn.Receive(sc)
	sc.ka.stop()
	sc.s.forget(sc)
	sc.mu.Lock()
	for _, call := range sc.inflight {
		call.ctx.cancel(fmt.Errorf("rpc: connection lost: %w", err))
	}
	sc.mu.Unlock()
	// The calls held back are answered now, each with its context's end.
	sc.drain(true)
}

// Alloc implements wire.Receiver: request tensors land in pooled buffers.
func (sc *serverConn) Alloc(in *wire.Inbound) error {
	in.AllocPooled()
	return nil
}

// Deliver implements wire.Receiver.
func (sc *serverConn) Deliver(in *wire.Inbound) {
	sc.frames.Add(1)
	h := &in.Header
	switch h.Kind {
	case wire.KindRequest:
		sc.dispatch(in)
		return
	case wire.KindCancel:
		sc.mu.Lock()
		call := sc.inflight[h.CallID]
		sc.mu.Unlock()
		if call != nil {
			reason := error(ErrCancelled)
			if h.Status == wire.DeadlineExceeded {
				reason = context.DeadlineExceeded
			}
			call.ctx.cancel(reason)
		}
	case wire.KindPing:
		sc.conn.Send(&wire.Message{Header: wire.Header{Kind: wire.KindPong, CallID: h.CallID}})
	}
	in.Release()
}

func (sc *serverConn) dispatch(in *wire.Inbound) {
	call := getServerCall(sc, in)
	m := sc.s.method(in.Header.Method)
	switch {
	case m == nil:
		call.refuse(Errorf(wire.Unimplemented, "unknown method %#x", in.Header.Method))
	case in.Err != nil:
		call.refuse(Errorf(errCode(in.Err), "%s: %v", m.Name, in.Err))
	case sc.answering.Load() >= sc.sendBudget || sc.queued.Load() > 0:
		// The peer has not taken the answers it has: hold the call back
		// (see holdBack) rather than have its handler make another.
		switch {
		case sc.running.Load() >= sc.maxCalls:
			call.refuse(Errorf(wire.ResourceExhausted, "%s: %d calls in progress on this connection, the server's limit", m.Name, sc.maxCalls))
		case sc.held.Load()-call.held > 0 && sc.held.Load() > sc.recvBudget:
			// A transport that does not honour Throttle delivers past
			// RecvBudget, which a stream reader or a packet session
			// shutting its window (alone or as the dual transport's
			// packet half) never does: the requests held back stay
			// within it.
			call.refuse(Errorf(wire.ResourceExhausted, "%s: the connection's requests in progress hold more than the server's %d bytes", m.Name, sc.recvBudget))
		default:
			sc.holdBack(call, m)
		}
	case m.opts.Inline && !m.opts.Deferrable:
		call.run(m, false)
	case sc.running.Load() >= sc.maxCalls:
		call.refuse(Errorf(wire.ResourceExhausted, "%s: %d calls in progress on this connection, the server's limit", m.Name, sc.maxCalls))
	case m.opts.Deferrable && m.chain == nil:
		sc.track(call)
		call.runDeferrable(m)
	default:
		sc.track(call)
		sc.woken.Store(true)
		sc.s.workers.Go(job{call, m})
	}
}

// track counts call among the calls in progress that cancel frames reach.
func (sc *serverConn) track(call *serverCall) {
	sc.running.Add(1)
	call.tracked = true
	sc.mu.Lock()
	sc.inflight[call.in.Header.CallID] = call
	sc.mu.Unlock()
}

func (sc *serverConn) Woke() bool { return sc.woken.Load() && sc.woken.Swap(false) }

// Unrun implements readside.Waker: the reader does not wait for workers, whose
// handlers may take long.
func (sc *serverConn) Unrun() bool { return false }

func (sc *serverConn) goAway() {
	sc.conn.Send(&wire.Message{Header: wire.Header{Kind: wire.KindGoAway}})
}

// serverCall is one call being handled; pooled.
type serverCall struct {
	sc   *serverConn
	in   *wire.Inbound
	ctx  callCtx
	resp Response
	msg  wire.Message
	err  []byte
	info ServerInfo // for interceptors

	tracked   bool  // in sc.inflight
	worker    bool  // the handler runs on a worker, where it may wait for answer budget
	refused   bool  // answered without running its handler: its request goes before the answer
	starting  bool  // taken from the backlog, counted in sc.starting
	held      int64 // request bytes counted in sc.held
	answering int64 // answer bytes counted in sc.answering (reserved by NewBuffer, then the answer's)

	answerFn func(error) // call.finish, made on first Defer (the pool's New cannot name finish: an initialization cycle)
}

var serverCalls = sync.Pool{New: func() any {
	call := new(serverCall)
	call.resp.call = call
	return call
}}

func getServerCall(sc *serverConn, in *wire.Inbound) *serverCall {
	call := serverCalls.Get().(*serverCall)
	call.sc, call.in = sc, in
	call.held = int64(in.Header.PayloadLen)
	sc.held.Add(call.held)
	var now int64
	if sc.clock != nil {
		now = sc.clock.DeliveredAt()
	}
	call.ctx.reset(sc.s.base, now, time.Duration(in.Header.Timeout))
	sc.s.active.Add(1)
	return call
}

// run runs the handler and sends its answer. A call that was queued for
// a goroutine is first checked against its deadline; an inline one runs as
// it arrives, where the check would only cost a clock read.
func (call *serverCall) run(m *method, queued bool) {
	call.finish(call.invoke(m, queued))
}

func (call *serverCall) invoke(m *method, queued bool) (err error) {
	defer func() {
		if p := recover(); p != nil {
			call.sc.s.logger().Error("rpc: handler panicked", "method", m.Name, "panic", p, "stack", string(debug.Stack()))
			err = Errorf(wire.Internal, "%s: handler panicked: %v", m.Name, p)
		}
	}()
	if queued && call.ctx.Err() != nil {
		return Errorf(wire.DeadlineExceeded, "%s: deadline passed before the handler ran", m.Name)
	}
	if m.chain != nil {
		return m.chain(&call.ctx, call.serverInfo(m), call.in, &call.resp)
	}
	return m.h(&call.ctx, call.in, &call.resp)
}

// runDeferrable runs a Deferrable handler on the receiving goroutine. Once
// the handler has deferred its answer the call is answer's: it may be
// answered and reused before the handler returns, so nothing of it is
// touched after that.
func (call *serverCall) runDeferrable(m *method) {
	call.resp.deferrable = true
	if err := call.invoke(m, false); err != ErrDeferred {
		call.resp.deferrable = false
		call.finish(err)
	}
}

// refuse answers call with err without running its handler.
func (call *serverCall) refuse(err error) {
	call.refused = true
	call.finish(err)
}

// finish sends the response, or err in its place.
func (call *serverCall) finish(err error) {
	if err == nil {
		err = call.checkResponse()
	}
	h := &call.in.Header
	if call.tracked {
		call.sc.mu.Lock()
		delete(call.sc.inflight, h.CallID)
		call.sc.mu.Unlock()
		call.sc.running.Add(-1)
	}
	call.msg = wire.Message{Header: wire.Header{Kind: wire.KindResponse, Method: h.Method, CallID: h.CallID}, Done: call}
	if err != nil {
		call.resp.reset()
		msg := err.Error()
		var st *Status
		if errors.As(err, &st) {
			// The code travels in the header; keep the context that
			// wraps the status, without the code's text.
			msg = strings.Replace(msg, st.Error(), st.Msg, 1)
		}
		call.err = append(call.err[:0], msg...)
		call.msg.Header.Kind = wire.KindError
		call.msg.Header.Status = CodeOf(err)
		call.msg.Meta = call.err
	} else {
		call.msg.Meta, call.msg.Tensors = call.resp.Meta, call.resp.Tensors
	}
	sc := call.sc
	if call.refused {
		// Nothing of the request is in the answer; a peer that reads no
		// answers would otherwise keep every refused request held.
		call.refused = false
		call.in.Release()
		call.in = nil
		sc.freed(call.held, 0)
		call.held = 0
	}
	a := answerBytes(&call.msg)
	if a > call.answering { // beyond what NewBuffer reserved
		sc.answering.Add(a - call.answering)
		call.answering = a
	}
	if a > sc.bigAnswer.Load() {
		sc.bigAnswer.Store(a)
	}
	if call.starting {
		call.starting = false
		sc.starting.Add(-1)
		sc.drain(false)
	}
	if err := sc.conn.Send(&call.msg); err != nil {
		call.Sent(&call.msg, err)
	}
}

// checkResponse refuses response tensors whose dtype, shape and length
// disagree: written as they are, they would break the frame encoding of the
// whole connection, not only this call.
func (call *serverCall) checkResponse() error {
	for i := range call.resp.Tensors {
		if err := call.resp.Tensors[i].Check(); err != nil {
			return Errorf(wire.Internal, "response tensor %d: %v", i, err)
		}
	}
	return nil
}

// Sent implements wire.Completion: the response is out, so the request and
// the response's buffers can go.
func (call *serverCall) Sent(*wire.Message, error) {
	reusable := call.ctx.finish()
	call.resp.reset()
	if call.in != nil {
		call.in.Release()
	}
	sc := call.sc
	s := sc.s
	sc.freed(call.held, call.answering)
	call.in, call.sc, call.msg, call.tracked, call.worker = nil, nil, wire.Message{}, false, false
	call.resp.deferrable = false
	call.held, call.answering = 0, 0
	if reusable {
		serverCalls.Put(call)
	}
	if s.active.Add(-1) == 0 {
		select {
		case s.drained <- struct{}{}:
		default:
		}
	}
}
