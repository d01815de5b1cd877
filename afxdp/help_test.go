package afxdp_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
)

// deafLink is a MemLink whose Wait hears neither datagrams nor Wake, only
// its timeout, until hear is closed: a reactor parked on it wakes late, as
// one parked in the netpoller does while another goroutine of its process
// keeps the scheduler busy.
type deafLink struct {
	*link.MemLink
	hear chan struct{}
	once sync.Once
}

func (l *deafLink) Wait(d time.Duration) error {
	if d < 0 {
		d = time.Hour
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-l.hear:
	}
	return l.MemLink.Wait(0) // ErrLinkClosed once closed
}

func (l *deafLink) Wake() {}

// hearAgain ends the deafness, so that the reactor can be stopped.
func (l *deafLink) hearAgain() { l.once.Do(func() { close(l.hear) }) }

// TestParkedReactorHelped runs calls to a server whose reactor parks at
// once on a deaf link and would wake only every RTO (4s): the client's
// reactor, spinning meanwhile in the same process, runs the server's steps
// for it (the handshake, the Receive that starts delivering, each call), so
// none waits for the server's timer.
func TestParkedReactorHelped(t *testing.T) {
	const serverRTO = 4 * time.Second
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	deaf := &deafLink{MemLink: lb, hear: make(chan struct{})}
	eb := afxdp.NewEndpoint(deaf, afxdp.Options{Ticket: testTicket, Spin: -1, RTO: serverRTO})
	ea := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket, Spin: 10 * time.Second})
	serveEcho(t, eb) // its cleanup, closing eb, runs after the one below
	t.Cleanup(func() {
		ea.Close()
		deaf.hearAgain()
		eb.Close()
	})
	// Unhelped, the handshake and each call would wait for the server's timer.
	start := time.Now()
	e := dialEcho(t, ea, eb.Addr().String())
	if d := time.Since(start); d >= serverRTO/2 {
		t.Errorf("the handshake took %v: it waited for the server's timer", d)
	}
	const calls = 200
	deadline := time.Now().Add(4 * serverRTO)
	for i := range calls {
		start := time.Now()
		if err := e.call(fmt.Appendf(nil, "call %d", i), time.Until(deadline)); err != nil {
			t.Fatalf("%v (server helped %d times)", err, eb.Stats().Helped)
		}
		if d := time.Since(start); d >= serverRTO/2 {
			t.Errorf("call %d took %v: it waited for the server's timer", i, d)
		}
	}
	if h := eb.Stats().Helped; h < calls {
		t.Errorf("the server's reactor was helped %d times for %d calls", h, calls)
	}
	if h := ea.Stats().Helped; h != 0 {
		t.Errorf("the spinning client's reactor was helped %d times", h)
	}
}
