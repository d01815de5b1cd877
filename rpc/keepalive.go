package rpc

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/wire"
)

// ErrKeepalive is why a connection fails when its peer shows no sign of
// life after a ping.
var ErrKeepalive = errors.New("rpc: keepalive timed out")

// Keepalive defaults, as gRPC's keepalive timeout; probing starts sooner
// because a training step rarely leaves a connection quiet for long.
const (
	DefaultKeepaliveTime    = 10 * time.Second
	DefaultKeepaliveTimeout = 20 * time.Second
)

// Keepalive says when a connection is probed and when it is given up.
// While calls are in flight and nothing has arrived for Time, a ping is
// sent; when nothing arrives for Timeout after it (a pong, or any byte of
// anything else) the connection fails, and its calls with it, so that they
// are retried on a new connection instead of waiting out their deadlines.
// An idle connection is not probed.
type Keepalive struct {
	Time    time.Duration // zero means DefaultKeepaliveTime, negative turns keepalive off
	Timeout time.Duration // zero means DefaultKeepaliveTimeout
}

func (k Keepalive) orDefault() Keepalive {
	if k.Time == 0 {
		k.Time = DefaultKeepaliveTime
	}
	if k.Timeout <= 0 {
		k.Timeout = DefaultKeepaliveTimeout
	}
	return k
}

// pingSize is what one ping adds to a connection's written bytes; anything
// more written after it means the peer is reading.
const pingSize = wire.HeaderSize

// A prober runs keepalive for one connection on a timer.
type prober struct {
	conn   Conn
	ka     Keepalive
	frames *atomic.Uint64 // frames received, for conns that count no bytes
	busy   func() bool
	fail   func(error)

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	lastIn  uint64
	lastOut uint64
	pinged  bool
	seq     uint64
}

func startProber(conn Conn, ka Keepalive, frames *atomic.Uint64, busy func() bool, fail func(error)) *prober {
	ka = ka.orDefault()
	p := &prober{conn: conn, ka: ka, frames: frames, busy: busy, fail: fail}
	if ka.Time < 0 {
		return p
	}
	p.lastIn, p.lastOut = p.progress()
	p.mu.Lock()
	p.timer = time.AfterFunc(ka.Time, p.tick)
	p.mu.Unlock()
	return p
}

// progress returns counters that grow when bytes arrive and when bytes
// leave.
func (p *prober) progress() (in, out uint64) {
	if pc, ok := p.conn.(ProgressConn); ok {
		in, out = pc.Progress()
	}
	return in + p.frames.Load(), out
}

func (p *prober) tick() {
	in, out := p.progress()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	alive := in != p.lastIn || out > p.lastOut+pingSize || (!p.pinged && out != p.lastOut)
	p.lastIn, p.lastOut = in, out
	switch {
	case alive || !p.busy():
		p.pinged = false
		p.timer.Reset(p.ka.Time)
	case !p.pinged:
		p.pinged = true
		p.seq++
		p.timer.Reset(p.ka.Timeout)
		p.conn.Send(&wire.Message{Header: wire.Header{Kind: wire.KindPing, CallID: p.seq}})
	default:
		p.stopped = true
		go p.fail(fmt.Errorf("%w: nothing from %v for %v after a ping", ErrKeepalive, p.conn.RemoteAddr(), p.ka.Timeout))
	}
}

func (p *prober) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.timer != nil {
		p.timer.Stop()
	}
}
