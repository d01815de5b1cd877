package rpc

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/wire"
)

// ClientOptions configure a Client. Every field but Transport may be left
// zero.
type ClientOptions struct {
	// Transport dials the peer. It must be set: rpc links no transport of
	// its own, so that the core never imports one (&tcp.Transport{} from
	// package rpc/tcp is the one every peer can fall back to).
	Transport Transport
	// Name is the peer's name in errors (a task name such as
	// "/job:ps/replica:0/task:0"); empty means the address.
	Name string
	// FailFast makes a call fail at once with Unavailable while the peer
	// cannot be reached, instead of waiting for it until the call's deadline.
	FailFast bool
	// MaxInflight bounds the calls in flight on the connection; further
	// calls wait for a slot. Zero means 4096.
	MaxInflight int
	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts, which doubles after each failure. Zero means 10ms and 1s.
	MinBackoff, MaxBackoff time.Duration
	// Keepalive probes a connection with calls in flight that has gone
	// quiet, and fails it when the peer shows no sign of life; the zero
	// value means the defaults (see Keepalive).
	Keepalive Keepalive
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
	// Interceptors wrap every call, the first outermost (see
	// ClientInterceptor); NewClient chains them once.
	Interceptors []ClientInterceptor
}

// A Client calls one peer over one cached connection, multiplexing calls by
// id. It reconnects, with backoff, when the peer goes away. Safe for
// concurrent use.
type Client struct {
	addr  string
	opts  ClientOptions
	chain Invoker // nil without interceptors

	mu       sync.Mutex
	cc       *clientConn
	dialing  chan struct{} // closed when the dial in progress ends
	backoff  time.Duration
	retryAt  time.Time
	lastErr  error
	closed   bool
	redialed int
}

// NewClient returns a client for the peer at addr. It dials lazily, on the
// first call. It panics when opts.Transport is nil: a client without a
// transport is a programming error, better found where it is made than at
// its first call.
func NewClient(addr string, opts ClientOptions) *Client {
	if opts.Transport == nil {
		panic("rpc: NewClient(" + addr + "): ClientOptions.Transport is nil (rpc has no default transport; use &tcp.Transport{} from package rpc/tcp)")
	}
	if opts.Name == "" {
		opts.Name = addr
	}
	if opts.MaxInflight <= 0 {
		opts.MaxInflight = 4096
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 10 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Client{addr: addr, opts: opts}
	if len(opts.Interceptors) > 0 {
		c.chain = chainClient(opts.Interceptors, c.invoke)
	}
	return c
}

// Addr returns the peer's address.
func (c *Client) Addr() string { return c.addr }

// Transport returns the name of the transport the client dials with.
func (c *Client) Transport() string { return c.opts.Transport.Name() }

// A Request is what a call sends. Meta and the tensors' memory must stay
// unchanged until the call returns.
type Request struct {
	Meta    []byte
	Tensors []wire.Tensor
}

// A Reply receives a call's answer. Meta and Tensors are valid until
// Release; a tensor whose Buf is taken (set to nil) or Ref'd outlives it.
type Reply struct {
	Meta    []byte
	Tensors []wire.Tensor
	// Alloc, when set, chooses where the reply's tensors land (say, straight
	// into a variable's memory) by setting each in.Tensors[i].Data to a slice
	// of exactly the announced size; by default they land in pooled buffers.
	// It runs on the goroutine reading the connection: its receiving
	// goroutine, or the caller reading its own answer.
	Alloc func(in *wire.Inbound) error

	in *wire.Inbound
}

// Release returns the reply's buffers. The Reply can then be reused.
func (r *Reply) Release() {
	if r.in != nil {
		r.in.Release()
		r.in = nil
	}
	r.Meta, r.Tensors = nil, nil
}

// Call invokes method m on the peer and waits for the answer or for ctx to
// end. Errors wrap a *Status (test with errors.Is / errors.As); a cancelled
// or expired ctx also sends a cancel frame so the handler stops early.
func (c *Client) Call(ctx context.Context, m Method, req *Request, resp *Reply) error {
	if c.chain != nil {
		return c.intercepted(ctx, m, req, resp)
	}
	return c.call(ctx, m, req, resp, nil)
}

// call makes a call; info, when not nil, learns the path it took.
func (c *Client) call(ctx context.Context, m Method, req *Request, resp *Reply, info *ClientInfo) error {
	resp.Release()
	for i := range req.Tensors {
		if err := req.Tensors[i].Check(); err != nil {
			return c.fail(m, Errorf(wire.InvalidArgument, "request tensor %d: %v", i, err))
		}
	}
	var timeout time.Duration
	if d, ok := ctx.Deadline(); ok {
		if timeout = time.Until(d); timeout <= 0 {
			return c.fail(m, Errorf(wire.DeadlineExceeded, "deadline passed before the call"))
		}
	}
	var (
		cc  *clientConn
		k   *call
		err error
	)
	for {
		if cc, err = c.conn(ctx); err != nil {
			return c.fail(m, err)
		}
		if k, err = cc.acquire(ctx); err != nil {
			return c.fail(m, err)
		}
		if !k.reads {
			break
		}
		if err = cc.checkIdle(k); err == nil {
			break
		}
		// The peer closed the connection while nobody read it: this
		// call goes on a new one.
		cc.unsent(k)
		c.broken(cc, err)
	}
	k.msg.Header = wire.Header{Kind: wire.KindRequest, Method: m.ID, CallID: k.id, Timeout: uint64(timeout)}
	k.msg.Meta, k.msg.Tensors = req.Meta, req.Tensors
	k.reply = resp
	path, err := cc.send(&k.msg)
	if info != nil {
		info.Path = path
	}
	if err != nil {
		cc.unsent(k)
		c.broken(cc, err)
		return c.fail(m, Errorf(failCode(err), "%w", err))
	}
	if k.reads && !cc.sr.Answers(string(path)) {
		cc.handBack(k)
	}
	if k.reads {
		cc.readOwn(k)
	}
	zombie, err := k.wait(ctx)
	if !zombie {
		cc.release(k)
	}
	if err != nil {
		return c.fail(m, err)
	}
	return nil
}

// fail wraps a call's error with the operation and the peer.
func (c *Client) fail(m Method, err error) error {
	var st *Status
	if !errors.As(err, &st) {
		st = &Status{Code: CodeOf(err), Msg: err.Error()}
	}
	return &callError{op: m.Name, peer: c.opts.Name, st: st}
}

// Close closes the connection; calls in flight fail with Unavailable.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	cc := c.cc
	c.cc = nil
	c.mu.Unlock()
	if cc != nil {
		cc.conn.Close()
	}
	return nil
}

// Stats describes a client's connection.
type Stats struct {
	Transport  string       // the transport the client dials with
	Path       netpath.Path // the path calls take now, for transports that choose one per peer
	Connected  bool
	Reconnects int // connections made after the first
}

// Stats returns the client's connection state.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{Transport: c.opts.Transport.Name(), Path: netpath.Path(c.opts.Transport.Name()), Connected: c.cc != nil, Reconnects: max(c.redialed-1, 0)}
	if c.cc != nil {
		if pc, ok := c.cc.conn.(PathConn); ok {
			st.Path = pc.Path()
		}
	}
	return st
}

// conn returns the live connection, dialing when there is none.
func (c *Client) conn(ctx context.Context) (*clientConn, error) {
	for {
		c.mu.Lock()
		if cc := c.cc; cc != nil {
			c.mu.Unlock()
			return cc, nil
		}
		if c.closed {
			c.mu.Unlock()
			return nil, Errorf(wire.Unavailable, "client closed")
		}
		if wait := c.dialing; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, Errorf(CodeOf(ctx.Err()), "waiting for connection: %v", ctx.Err())
			}
		}
		if delay := time.Until(c.retryAt); delay > 0 {
			lastErr := c.lastErr
			c.mu.Unlock()
			if c.opts.FailFast {
				return nil, Errorf(failCode(lastErr), "%v", lastErr)
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				return nil, Errorf(CodeOf(ctx.Err()), "peer unreachable (%v): %v", lastErr, ctx.Err())
			}
		}
		c.dialing = make(chan struct{})
		c.mu.Unlock()
		// The connection dialed is this call's even if it fails at once:
		// looking it up again could find it gone and dial another, and a
		// peer that closes every connection it accepts would be dialed
		// in a loop for as long as the call lasts.
		cc, err := c.dial(ctx)
		if cc != nil {
			return cc, nil
		}
		if CodeOf(err) == wire.Unauthenticated {
			// The peer's certificate, or this end's, was refused: the
			// next dial would be refused alike, so the call fails now
			// (later calls still dial again, after the backoff).
			return nil, err
		}
	}
}

// dial connects, or returns nil and why it could not.
func (c *Client) dial(ctx context.Context) (*clientConn, error) {
	conn, err := c.opts.Transport.Dial(ctx, c.addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.dialing)
	c.dialing = nil
	if err != nil {
		c.failedLocked(err)
		return nil, err
	}
	if c.closed {
		conn.Close()
		return nil, nil
	}
	c.lastErr = nil
	c.redialed++
	c.cc = newClientConn(c, conn)
	go c.cc.receive()
	return c.cc, nil
}

// failCode is the code of a call that fails for err, the last attempt to
// connect: Unavailable, which callers retry, unless the peer refused this
// end for good.
func failCode(err error) wire.Code {
	if CodeOf(err) == wire.Unauthenticated {
		return wire.Unauthenticated
	}
	return wire.Unavailable
}

// failedLocked records a failed attempt to connect and when to try again.
func (c *Client) failedLocked(err error) {
	c.lastErr = err
	c.backoff = min(max(2*c.backoff, c.opts.MinBackoff), c.opts.MaxBackoff)
	c.retryAt = time.Now().Add(c.backoff)
}

// broken forgets cc so that the next call dials again. A connection lost
// before its peer sent a single frame counts as a failed attempt, so the
// next dial waits its backoff (and a FailFast call fails at once): a peer
// that accepts and then refuses — a TLS 1.3 server that rejects the
// client's certificate after the client's handshake is done, a server at
// its connection limit — is not dialed again at once by every call. Only a
// connection that carried frames resets the backoff.
func (c *Client) broken(cc *clientConn, err error) {
	c.mu.Lock()
	if c.cc == cc {
		c.cc = nil
		c.opts.Logger.Debug("rpc: connection lost", "peer", c.opts.Name, "err", err)
		if cc.frames.Load() == 0 {
			c.failedLocked(err)
		} else {
			c.backoff = 0
		}
	}
	c.mu.Unlock()
}
