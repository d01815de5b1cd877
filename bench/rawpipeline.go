package bench

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// RawPipeline keeps a fixed number of echo requests in flight on one raw
// connection: a writer goroutine sends as many frames as there are free
// slots in one write, and the reader frees slots once it has consumed every
// whole response one read returned. This is the most a pipelined protocol
// on one TCP connection can do on this machine, the bound an RPC framework
// is measured against.
type RawPipeline struct {
	c  net.Conn
	br *bufio.Reader
}

// DialRawPipeline connects a pipelined echo client to the raw server at addr.
func DialRawPipeline(addr string) (*RawPipeline, error) {
	c, err := dialRaw(addr, RawModeEcho)
	if err != nil {
		return nil, err
	}
	return &RawPipeline{c: c, br: bufio.NewReaderSize(c, rawReadSize)}, nil
}

// Close closes the connection.
func (p *RawPipeline) Close() error { return p.c.Close() }

// Run sends n echo requests of size bytes with window of them in flight and
// waits for all the answers, recording each one's latency (from the write
// that carried it to the read that returned it) in lat, if not nil. Each
// request carries its sequence number, checked on the way back. A failed Run
// leaves the connection unusable.
func (p *RawPipeline) Run(n, size, window int, lat *Samples) error {
	if window < 1 || size < 0 || size > MaxRawFrame {
		return fmt.Errorf("bench: raw pipeline of window %d and size %d: invalid", window, size)
	}
	start := time.Now()
	stamps := make([]atomic.Int64, window)
	var credits atomic.Int64
	credits.Store(int64(window))
	wake := make(chan struct{}, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		werr = p.write(n, size, window, stamps, &credits, wake, stop, start)
		if werr != nil {
			p.c.Close() // unblocks the reader
		}
	}()
	rerr := p.read(n, size, window, stamps, &credits, wake, lat, start)
	close(stop)
	if rerr != nil {
		p.c.Close() // unblocks the writer
	}
	wg.Wait()
	if werr != nil {
		return werr
	}
	return rerr
}

func (p *RawPipeline) write(n, size, window int, stamps []atomic.Int64, credits *atomic.Int64,
	wake, stop chan struct{}, start time.Time) error {
	frame := 4 + size
	buf := make([]byte, 0, window*frame)
	for sent := 0; sent < n; {
		k := int(credits.Swap(0))
		if k == 0 {
			select {
			case <-wake:
			case <-stop:
				return nil
			}
			continue
		}
		k = min(k, n-sent)
		buf = buf[:0]
		now := int64(time.Since(start))
		for j := range k {
			seq := sent + j
			stamps[seq%window].Store(now)
			buf = binary.LittleEndian.AppendUint32(buf, uint32(size))
			body := len(buf)
			buf = buf[:body+size]
			if size >= 8 {
				binary.LittleEndian.PutUint64(buf[body:], uint64(seq))
			}
		}
		if _, err := p.c.Write(buf); err != nil {
			return fmt.Errorf("bench: raw pipeline write: %w", err)
		}
		sent += k
	}
	return nil
}

func (p *RawPipeline) read(n, size, window int, stamps []atomic.Int64, credits *atomic.Int64,
	wake chan struct{}, lat *Samples, start time.Time) error {
	frame := 4 + size
	body := make([]byte, size)
	var hdr [4]byte
	freed := 0
	for got := 0; got < n; got++ {
		if _, err := io.ReadFull(p.br, hdr[:]); err != nil {
			return fmt.Errorf("bench: raw pipeline read: %w", err)
		}
		if m := binary.LittleEndian.Uint32(hdr[:]); int(m) != size {
			return fmt.Errorf("bench: raw pipeline answer %d of %d bytes, want %d", got, m, size)
		}
		if _, err := io.ReadFull(p.br, body); err != nil {
			return fmt.Errorf("bench: raw pipeline read: %w", err)
		}
		if size >= 8 {
			if seq := binary.LittleEndian.Uint64(body); seq != uint64(got) {
				return fmt.Errorf("bench: raw pipeline answer %d carries sequence %d", got, seq)
			}
		}
		if lat != nil {
			lat.Add(time.Since(start) - time.Duration(stamps[got%window].Load()))
		}
		freed++
		if p.br.Buffered() < frame {
			// The next read may block: hand the slots back first.
			credits.Add(int64(freed))
			freed = 0
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
	return nil
}
