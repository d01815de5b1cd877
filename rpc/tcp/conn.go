package tcp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// ErrStalled is why a connection fails when its peer reads nothing of what
// is written to it for the transport's StallTimeout.
var ErrStalled = errors.New("tcp: peer stopped reading")

const (
	readBufferSize = 64 << 10
	// Tensor data shorter than this is copied next to its frame's head,
	// because another iovec costs more than the copy.
	copyThreshold = 8 << 10
)

// conn frames messages over a TCP connection.
//
// Writing: Send queues the message and never waits for the socket. One
// party at a time holds the write side (writing): the caller itself when the
// connection is idle, the reader when it uncorks the answers of a batch of
// inline handlers, or the connection's reactor once callers contend. That
// party writes without blocking; when the socket is full it hands the write
// side to a drainer goroutine that waits for room, so neither a caller nor
// the reader ever waits on the peer. The reader must not: two peers whose
// readers both wait to write, each for the other to read, wait forever.
//
// While Receive is delivering the frames that one read returned (corked),
// queued answers wait, so that quick handlers' answers leave in one write
// when the batch is done.
type conn struct {
	nc      *net.TCPConn
	raw     syscall.RawConn
	br      *bufio.Reader
	lim     *wire.Limits
	stall   time.Duration
	reactor *reactor
	closed  chan struct{} // closed when the connection fails

	bytesIn, bytesOut atomic.Uint64 // for keepalive

	mu        sync.Mutex
	queue     []*wire.Message
	spare     []*wire.Message
	writing   bool // someone holds the write side and out
	scheduled bool
	corked    bool
	err       error
	inSyscall bool // a writev, encryption or layout is using out's parts
	waiters   int  // Withdraw calls waiting for inSyscall to clear
	written   *sync.Cond
	// Frames sent and received. When they differ by more than one, other
	// calls are in flight and their callers are about to queue frames too,
	// so the reactor (which yields first) writes; otherwise the caller
	// writes at once, which is best for latency.
	framesOut uint64
	framesIn  atomic.Uint64

	// The read side's state, held by whoever reads: the receiving
	// goroutine, or a caller it lent the read side to.
	hb        [wire.HeaderSize]byte
	throttle  rpc.Throttle
	wk        readside.Waker
	holding   bool // the reader corked the writer for the batch it delivers
	delivered int  // frames of the current batch delivered
	peekFn    func(fd uintptr) bool
	peekBuf   [1]byte
	peeked    int
	peekErr   error

	out      batch // held with the write side
	writeErr error // the last writev's error; held with the write side
	tryFn    func(fd uintptr) bool
	blockFn  func(fd uintptr) bool
	drainFn  func() // c.drain, made once: go c.drain() would allocate a closure a call

	// With TLS (see tlsconn.go): the writer encrypts the batch's parts
	// into shim and writes the ciphertext; nothing is written before the
	// handshake is done (secured).
	tls      *tls.Conn
	shim     *cipherShim
	secured  bool // guarded by mu
	tlsParts [][]byte
	hint     string // Transport.PlaintextHint, for a refused plaintext client
	dialer   bool   // the client's end, which a TLS peer may refuse on its first read
}

// newConn sets up nc, a connection the client dialed to address dialed
// or, with dialed empty, one a server accepted. With t.TLS, a client's
// handshake runs here, bounded by ctx, and a server's in Receive.
func newConn(ctx context.Context, nc *net.TCPConn, t *Transport, dialed string) (*conn, error) {
	nc.SetNoDelay(true)
	raw, err := nc.SyscallConn()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("tcp: connection to %v: %w", nc.RemoteAddr(), err)
	}
	c := &conn{nc: nc, raw: raw, lim: &t.Limits, stall: t.stallTimeout(), reactor: t.reactors().assign(), closed: make(chan struct{})}
	c.written = sync.NewCond(&c.mu)
	c.tryFn, c.blockFn, c.peekFn, c.drainFn = c.tryWrite, c.blockingWrite, c.peek, c.drain
	var src io.Reader = nc
	if t.TLS != nil {
		c.hint, c.dialer = t.PlaintextHint, dialed != ""
		if err := c.startTLS(ctx, t.tlsConfig(dialed), dialed != ""); err != nil {
			nc.Close()
			return nil, err
		}
		src = c.tls
	}
	c.br = bufio.NewReaderSize(countingReader{src, &c.bytesIn}, readBufferSize)
	return c, nil
}

// pending reports whether the holder of the write side has bytes to write.
func (c *conn) pending() bool {
	return c.out.pending() || (c.shim != nil && c.shim.pending() > 0)
}

func (c *conn) LocalAddr() net.Addr  { return c.nc.LocalAddr() }
func (c *conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Progress implements ProgressConn.
func (c *conn) Progress() (in, out uint64) { return c.bytesIn.Load(), c.bytesOut.Load() }

func (c *conn) Send(m *wire.Message) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	if k := m.Header.Kind; k == wire.KindPing || k == wire.KindPong {
		// Probes go first, so data queued before them cannot delay their
		// answer past a keepalive timeout.
		c.queue = slices.Insert(c.queue, 0, m)
	} else {
		c.queue = append(c.queue, m)
	}
	c.framesOut++
	switch {
	case c.writing || c.scheduled || c.corked:
		c.mu.Unlock()
	case c.framesOut-c.framesIn.Load() <= 1 || c.framesIn.Load()-c.framesOut <= 1:
		c.writing = true
		c.mu.Unlock()
		c.writeNow()
	default:
		c.scheduled = true
		c.mu.Unlock()
		c.reactor.schedule(c)
	}
	return nil
}

// Withdraw implements Withdrawer. A message still queued, or laid out in
// the writer's batch with none of it written, leaves it; one the writer
// has begun is finished from a copy of what is left of it, which Withdraw
// makes without the connection's lock (see batch.hold), so that other
// calls' Sends and the writer never wait for it; one in neither place is
// written and being completed.
func (c *conn) Withdraw(m *wire.Message) rpc.Withdrawal {
	c.mu.Lock()
	if i := slices.Index(c.queue, m); i >= 0 {
		c.queue = slices.Delete(c.queue, i, i+1)
		c.mu.Unlock()
		return rpc.Unsent
	}
	for c.inSyscall {
		c.waiters++
		c.written.Wait()
		c.waiters--
	}
	i := c.out.index(m)
	if i < 0 {
		c.mu.Unlock()
		return rpc.Completing
	}
	if c.out.unstarted(i) {
		c.out.drop(i)
		c.mu.Unlock()
		return rpc.Unsent
	}
	rest := c.out.hold(i)
	c.mu.Unlock()
	if rest.left > 0 {
		rest.copy()
		c.placeRest(&rest)
	}
	return rpc.Withdrawn
}

// placeRest puts a withdrawn message's copied rest in its batch and, when
// the writer gave up the write side at it (park), has the reactor go on,
// even on a connection failed meanwhile: the writer completes its batch.
func (c *conn) placeRest(rest *heldRest) {
	c.mu.Lock()
	placed := c.out.place(rest)
	restart := placed && !c.writing && !c.scheduled && c.pending()
	if restart {
		c.scheduled = true
	}
	c.mu.Unlock()
	if !placed {
		rest.buf.Release()
	}
	if restart {
		c.reactor.schedule(c)
	}
}

func (c *conn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was queued while corked, from the receiving goroutine,
// without waiting for the socket.
func (c *conn) uncork() {
	c.mu.Lock()
	c.corked = false
	if c.writing || c.scheduled || len(c.queue) == 0 {
		c.mu.Unlock()
		return
	}
	c.writing = true
	c.mu.Unlock()
	c.writeNow()
}

// fail records the first error, closes the socket and completes everything
// still queued with the error.
func (c *conn) fail(err error) error {
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %w", rpc.ErrClosed, err)
		close(c.closed)
	}
	err = c.err
	// The holder of the write side completes its batch; what nobody took
	// yet is completed here, once.
	queue := c.queue
	c.queue = nil
	c.mu.Unlock()
	c.nc.Close()
	for _, m := range queue {
		m.Complete(err)
	}
	return err
}

func (c *conn) Close() error {
	c.fail(io.EOF)
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Uint64
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n.Add(uint64(n))
	return n, err
}
