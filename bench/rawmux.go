package bench

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
)

// ErrRawMuxClosed is returned by RawMux.Echo once the connection has failed
// or been closed.
var ErrRawMuxClosed = errors.New("bench: raw mux closed")

// RawMux is the raw TCP echo with blocking callers: each caller queues its
// frame and sleeps until the reader goroutine hands it the answer. A writer
// goroutine, woken by the first queued frame, yields once and writes every
// queued frame in one write. It is the least an RPC client with one
// goroutine per call must do (one wake-up per call, batched writes), so the
// gap between it and the raw pipeline is what blocking callers cost on this
// machine, whatever the framework.
//
// Each caller owns a slot, 0 ≤ slot < Slots(); a slot makes one call at a
// time. Answers are matched to slots by the slot number that the first four
// bytes of each frame carry, so frames are at least 4 bytes long.
type RawMux struct {
	c     net.Conn
	waits []chan error

	mu     sync.Mutex
	queue  []byte
	spare  []byte
	err    error
	wake   chan struct{}
	closed chan struct{}
}

// DialRawMux connects a mux with slots callers to the raw server at addr.
func DialRawMux(addr string, slots int) (*RawMux, error) {
	if slots < 1 {
		return nil, fmt.Errorf("bench: raw mux with %d slots: invalid", slots)
	}
	c, err := dialRaw(addr, RawModeEcho)
	if err != nil {
		return nil, err
	}
	m := &RawMux{c: c, waits: make([]chan error, slots), wake: make(chan struct{}, 1), closed: make(chan struct{})}
	for i := range m.waits {
		m.waits[i] = make(chan error, 1)
	}
	go m.read()
	go m.write()
	return m, nil
}

// Slots returns the number of callers the mux serves.
func (m *RawMux) Slots() int { return len(m.waits) }

// Close closes the connection; calls waiting fail with ErrRawMuxClosed.
func (m *RawMux) Close() error {
	m.fail(ErrRawMuxClosed)
	return nil
}

func (m *RawMux) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return
	}
	m.err = err
	close(m.closed)
	m.c.Close()
}

// Echo sends req (at least 4 bytes; its first four are replaced by the
// slot) from slot and waits for the answer. The reader checks the answer's
// length and slot and drops its bytes: the point is the wake-up.
func (m *RawMux) Echo(slot int, req []byte) error {
	if len(req) < 4 || slot < 0 || slot >= len(m.waits) {
		return fmt.Errorf("bench: raw mux echo of %d bytes from slot %d: invalid", len(req), slot)
	}
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return m.err
	}
	m.queue = binary.LittleEndian.AppendUint32(m.queue, uint32(len(req)))
	m.queue = binary.LittleEndian.AppendUint32(m.queue, uint32(slot))
	m.queue = append(m.queue, req[4:]...)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-m.waits[slot]:
		if err != nil {
			return err
		}
	case <-m.closed:
		return ErrRawMuxClosed
	}
	return nil
}

func (m *RawMux) write() {
	for {
		select {
		case <-m.wake:
		case <-m.closed:
			return
		}
		// Let the callers that are runnable queue their frames first.
		runtime.Gosched()
		m.mu.Lock()
		out := m.queue
		m.queue = m.spare[:0]
		m.mu.Unlock()
		if len(out) > 0 {
			if _, err := m.c.Write(out); err != nil {
				m.fail(fmt.Errorf("bench: raw mux write: %w", err))
				return
			}
		}
		m.spare = out
	}
}

func (m *RawMux) read() {
	br := bufio.NewReaderSize(m.c, rawReadSize)
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			m.fail(fmt.Errorf("bench: raw mux read: %w", err))
			return
		}
		n := int(binary.LittleEndian.Uint32(hdr[:]))
		slot := int(binary.LittleEndian.Uint32(hdr[4:]))
		if n < 4 || slot >= len(m.waits) {
			m.fail(fmt.Errorf("bench: raw mux answer of %d bytes for slot %d", n, slot))
			return
		}
		if _, err := br.Discard(n - 4); err != nil {
			m.fail(fmt.Errorf("bench: raw mux read: %w", err))
			return
		}
		m.waits[slot] <- nil
	}
}
