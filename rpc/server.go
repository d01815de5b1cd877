package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/internal/parked"
)

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("rpc: server closed")

// A Server dispatches calls arriving on its listeners to registered
// handlers. Register every method before Serve.
type Server struct {
	// Logger receives connection-level errors; nil means slog.Default().
	Logger *slog.Logger
	// MaxConcurrentCalls bounds the calls of one connection running on
	// goroutines of their own (not Inline), with those held back for
	// SendBudget (Inline ones too); further calls fail at once with
	// ResourceExhausted, as HTTP/2 refuses streams past its limit.
	// Zero means DefaultMaxConcurrentCalls, as many as a Client sends.
	MaxConcurrentCalls int
	// RecvBudget bounds the request tensor bytes of one connection held
	// by calls in progress: past it the server reads no more of the
	// connection until calls finish. One frame larger than the budget is
	// still read when the connection holds nothing else. Zero means
	// DefaultRecvBudget.
	RecvBudget int64
	// SendBudget bounds the answer bytes of one connection waiting to be
	// sent, or reserved by handlers making them (Response.NewBuffer): at
	// it the server reads no more of the connection and holds back the
	// calls already read, and NewBuffer waits for room, so that a peer
	// that does not read its answers holds at most SendBudget plus one
	// answer, however many calls it starts, rather than growing the
	// server's memory. Zero means DefaultSendBudget.
	SendBudget int64
	// Keepalive probes connections with calls in progress that have gone
	// quiet; see Keepalive.
	Keepalive Keepalive
	// MaxConns bounds the connections served at once, MaxConnsPerHost
	// those from one peer address; a connection past either is closed as
	// it arrives, so a flood of connections costs a bounded amount of
	// memory. Zero means DefaultMaxConns and DefaultMaxConnsPerHost.
	MaxConns, MaxConnsPerHost int
	// Interceptors wrap every handler, the first outermost (see
	// ServerInterceptor). Register chains them once per method: set them
	// before registering.
	Interceptors []ServerInterceptor

	// methods is replaced, never changed, so that dispatch reads it
	// without a lock while Register may still add methods.
	methods atomic.Pointer[map[uint32]*method]
	base    context.Context

	mu        sync.Mutex
	listeners map[Listener]struct{}
	conns     map[*serverConn]struct{}
	perHost   map[string]int
	refused   int // connections closed for the limits, for the log
	plaintext int // plaintext clients of a TLS listener, for the log
	closing   bool
	active    atomic.Int64  // calls being handled
	drained   chan struct{} // a token when active drops to zero
	workers   parked.Pool[job]
}

// NewServer returns a server with no methods.
func NewServer() *Server {
	s := &Server{
		base:      context.Background(),
		listeners: make(map[Listener]struct{}),
		conns:     make(map[*serverConn]struct{}),
		perHost:   make(map[string]int),
		drained:   make(chan struct{}, 1),
		workers:   newWorkers(),
	}
	s.methods.Store(&map[uint32]*method{})
	return s
}

// Register adds a method; it may be called while the server runs. It
// panics when the method's ID is taken, since that is a programming error
// that would misroute calls.
func (s *Server) Register(m Method, h Handler, opts HandlerOptions) {
	if m.ID != MethodID(m.Name) {
		panic(fmt.Sprintf("rpc: method %q has ID %#x, want %#x", m.Name, m.ID, MethodID(m.Name)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.methods.Load()
	if prev, ok := old[m.ID]; ok {
		panic(fmt.Sprintf("rpc: method %q collides with %q", m.Name, prev.Name))
	}
	next := make(map[uint32]*method, len(old)+1)
	for id, v := range old {
		next[id] = v
	}
	next[m.ID] = &method{Method: m, h: h, opts: opts, chain: chainServer(s.Interceptors, h)}
	s.methods.Store(&next)
}

func (s *Server) method(id uint32) *method { return (*s.methods.Load())[id] }

// Serve accepts connections on l and serves them until l fails or the
// server shuts down; then it returns ErrServerClosed or the accept error.
func (s *Server) Serve(l Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	for {
		c, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			delete(s.listeners, l)
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			return fmt.Errorf("rpc: accept on %v: %w", l.Addr(), err)
		}
		s.ServeConn(c)
	}
}

// ServeConn serves calls arriving on c, on a goroutine of its own, unless
// the server is closing or c is past MaxConns or MaxConnsPerHost.
func (s *Server) ServeConn(c Conn) {
	sc := newServerConn(s, c)
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		c.Close()
		return
	}
	if len(s.conns) >= s.maxConns() || s.perHost[sc.host] >= s.maxConnsPerHost() {
		s.refused++
		refused, n := s.refused, len(s.conns)
		s.mu.Unlock()
		c.Close()
		if refused&(refused-1) == 0 { // 1, 2, 4, ...: a flood logs a few lines
			s.logger().Warn("rpc: connection refused: too many connections", "peer", c.RemoteAddr(), "serving", n, "refused", refused)
		}
		return
	}
	s.conns[sc] = struct{}{}
	s.perHost[sc.host]++
	s.mu.Unlock()
	go sc.serve()
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *Server) forget(sc *serverConn) {
	s.mu.Lock()
	delete(s.conns, sc)
	if s.perHost[sc.host]--; s.perHost[sc.host] <= 0 {
		delete(s.perHost, sc.host)
	}
	s.mu.Unlock()
}

// Shutdown stops accepting connections, tells peers to send no new calls,
// waits for the calls in flight to finish until ctx is done, then closes
// every connection. It returns ctx's error when calls were cut short.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for l := range s.listeners {
		l.Close()
	}
	conns := make([]*serverConn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	for _, sc := range conns {
		sc.goAway()
	}
	var err error
	for err == nil && s.active.Load() > 0 {
		select {
		case <-s.drained:
		case <-ctx.Done():
			err = fmt.Errorf("rpc: shutdown with calls in flight: %w", ctx.Err())
		}
	}
	for _, sc := range conns {
		sc.conn.Close()
	}
	s.workers.Close()
	return err
}

// Close shuts the server down without waiting for calls in flight.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	s.Shutdown(ctx)
	return nil
}
