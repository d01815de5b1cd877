package rpc

import (
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
// answers waiting to be sent are within the send budget, and its payload
// fits the receive budget beside the requests held by calls in progress
// (or nothing is held).
func (sc *serverConn) Room(payload uint64) bool {
	if sc.answering.Load() > sc.sendBudget {
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
	}
	if sc.waiting.Load() {
		select {
		case sc.room <- struct{}{}:
		default:
		}
	}
}

// answerBytes is what a response adds to the bytes waiting to be sent.
func answerBytes(m *wire.Message) int64 {
	n := int64(wire.HeaderSize + len(m.Meta))
	for i := range m.Tensors {
		n += int64(len(m.Tensors[i].Data))
	}
	return n
}
