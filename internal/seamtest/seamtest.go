// Package seamtest checks the seam between package rpc and its transports,
// and between a net.Conn and those who find its optional interfaces, from
// the tests of the module's wrappers: a wrapper of a connection or of a
// receiver (the dual connection and its hello reader, the hello answerer,
// a TLS handshake's read-ahead, a test's counter) that does not forward a
// capability the value it wraps offers turns it off without a word, since
// the core, the transports, gRPC and the runtime find each by a type
// assertion. CheckForwards fails when a wrapper drops one, unless the
// wrapper's test says why it may.
package seamtest

import (
	"io"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/rpc"
)

// A capability is one interface of the seam, with, for one whose value
// says whether it is in use, the method that says so.
type capability struct {
	t  reflect.Type
	on func(v any) bool // nil: offered means on
}

func capOf[C any](on func(C) bool) capability {
	c := capability{t: reflect.TypeFor[C]()}
	if on != nil {
		c.on = func(v any) bool { return on(v.(C)) }
	}
	return c
}

// capabilities is every capability of the seam: those of rpc's
// capabilities.go and of internal/readside (seamtest's own test fails when
// one of those files declares an interface missing here).
var capabilities = []capability{
	// Offered by a connection.
	capOf[rpc.Withdrawer](nil),
	capOf[rpc.ProgressConn](nil),
	capOf[rpc.DeliveryClock](nil),
	capOf[rpc.PathConn](nil),
	capOf[rpc.PathSender](nil),
	capOf(readside.Reader.SelfReading),
	// Offered by a receiver.
	capOf[rpc.Throttle](nil),
	capOf[rpc.PlaintextWatcher](nil),
	capOf[readside.Lender](nil),
	capOf[readside.Waker](nil),
	// Offered by a net.Conn, beside net.Conn's own methods: gRPC reads
	// socket options through syscall.Conn (channelz), and its TLS
	// credentials keep it only when the raw conn offers it; the runtime's
	// io.Copy splices through ReaderFrom and WriterTo.
	capOf[syscall.Conn](nil),
	capOf[CloseWriter](nil),
	capOf[io.ReaderFrom](nil),
	capOf[io.WriterTo](nil),
}

// A CloseWriter half-closes a connection (*net.TCPConn, *tls.Conn).
type CloseWriter interface{ CloseWrite() error }

// A Drop is a capability a wrapper does not forward, or forwards switched
// off, on purpose: CheckForwards takes it as an exception.
type Drop struct {
	t   reflect.Type
	why string
}

// Dropping says that a wrapper does not forward capability C, and why.
func Dropping[C any](why string) Drop { return Drop{t: reflect.TypeFor[C](), why: why} }

// CheckForwards fails tb for each capability of the seam that inner, the
// connection or receiver wrapper wraps, offers and wrapper does not; and,
// for a capability whose value says whether it is in use (a connection
// that may lend its read side), for one inner has in use and wrapper does
// not. Each drop excuses one capability; a drop of a capability that
// wrapper forwards after all, or one without a reason, fails too, so that
// the excuses stay true.
func CheckForwards(tb testing.TB, wrapper, inner any, drops ...Drop) {
	tb.Helper()
	excused := map[reflect.Type]bool{}
	for _, d := range drops {
		if !isCapability(d.t) {
			tb.Errorf("seamtest: %T drops %v, which is no capability of the seam", wrapper, d.t)
		}
		if strings.TrimSpace(d.why) == "" {
			tb.Errorf("seamtest: %T drops %v without saying why", wrapper, d.t)
		}
		excused[d.t] = true
	}
	for _, c := range capabilities {
		innerHas, innerOn := c.offered(inner)
		wrapperHas, wrapperOn := c.offered(wrapper)
		switch {
		case excused[c.t] && wrapperOn:
			tb.Errorf("seamtest: %T is said to drop %v, but it forwards it", wrapper, c.t)
		case excused[c.t]:
		case innerHas && !wrapperHas:
			tb.Errorf("seamtest: %T drops %v, which the %T it wraps offers", wrapper, c.t, inner)
		case innerOn && !wrapperOn:
			tb.Errorf("seamtest: %T offers %v switched off, where the %T it wraps has it on", wrapper, c.t, inner)
		}
	}
}

// offered reports whether v implements c, and whether it has it in use.
func (c capability) offered(v any) (has, on bool) {
	if v == nil || !reflect.TypeOf(v).Implements(c.t) {
		return false, false
	}
	return true, c.on == nil || c.on(v)
}

func isCapability(t reflect.Type) bool {
	for _, c := range capabilities {
		if c.t == t {
			return true
		}
	}
	return false
}
