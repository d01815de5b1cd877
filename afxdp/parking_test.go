package afxdp_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/wire"
)

// idleSpell is how long the tests below leave a session without calls.
const idleSpell = 10 * time.Second

// idleSession connects two endpoints on fake time, with a session between
// them, and leaves them idle for idleSpell; lb may wrap b's link.
func idleSession(t *testing.T, rto time.Duration, wrap func(link.Link) link.Link) (ea, eb *afxdp.Endpoint, ca, cb *afxdp.Conn) {
	t.Helper()
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	ea, eb, ca, cb = connected(t, la, wrap(lb), fakeOptions(afxdp.Options{RTO: rto}))
	synctest.Wait()
	time.Sleep(idleSpell)
	synctest.Wait()
	return ea, eb, ca, cb
}

// TestIdleReactorSleepsLonger: a reactor with nothing to do sleeps longer
// each time it wakes to nothing, up to a second, instead of once per RTO
// (an idle 4ms-RTO session woke each reactor 2,500 times in 10s, on
// hosts where a dual connection's calls all took TCP); a call after the
// idle spell still goes at once.
func TestIdleReactorSleepsLonger(t *testing.T) {
	fakeTime(t, func(t *testing.T) {
		const rto = 4 * time.Millisecond
		la, lb := link.MemPair(memA, memB, link.MemOptions{})
		ea, eb, ca, cb := connected(t, la, lb, fakeOptions(afxdp.Options{RTO: rto}))
		synctest.Wait()
		pa, pb := ea.Stats().Parks, eb.Stats().Parks
		time.Sleep(idleSpell)
		synctest.Wait()
		// Doubling from 4ms to 1s takes 9 parks; the keepalives (every
		// quarter of the 30s IdleTimeout) start a few ramps more.
		const most = 40
		for _, p := range []struct {
			name        string
			before, now uint64
		}{{"dialer", pa, ea.Stats().Parks}, {"acceptor", pb, eb.Stats().Parks}} {
			t.Logf("%s: %d parks in %v idle", p.name, p.now-p.before, idleSpell)
			if p.now-p.before > most {
				t.Errorf("%s's reactor parked %d times in %v idle, want at most %d", p.name, p.now-p.before, idleSpell, most)
			}
		}
		sent := time.Now()
		callAfterIdle(t, ca, cb)
		if d := time.Since(sent); d > rto {
			t.Fatalf("a call after the idle spell arrived after %v of fake time, more than an RTO", d)
		}
	})
}

// TestSendAfterIdleResendsWithinRTOs: the first packet sent after an idle
// spell, transmitted by the sender while the reactors sleep their longest,
// is lost; its timer still runs within a few RTOs, not when the sender's
// reactor would have woken next.
func TestSendAfterIdleResendsWithinRTOs(t *testing.T) {
	fakeTime(t, func(t *testing.T) {
		const rto = 4 * time.Millisecond
		var lossy *dropLink
		ea, _, ca, cb := idleSession(t, rto, func(l link.Link) link.Link {
			lossy = &dropLink{Link: l, drops: map[uint32]int{0: 1}}
			return lossy
		})
		sent := time.Now()
		callAfterIdle(t, ca, cb)
		d := time.Since(sent)
		t.Logf("arrived after %v of fake time, %d resent", d, ea.Stats().Resent)
		if lossy.drops[0] != 0 {
			t.Fatal("the first packet after the idle spell was not dropped")
		}
		if d > 4*rto {
			t.Fatalf("a packet lost after the idle spell was resent after %v of fake time, want within %v", d, 4*rto)
		}
	})
}

// callAfterIdle sends one small frame from ca and waits for cb to get it.
func callAfterIdle(t *testing.T, ca, cb *afxdp.Conn) {
	t.Helper()
	rb := newCollector(1)
	go cb.Receive(rb)
	done := make(doneChan, 1)
	if err := ca.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1}, Meta: []byte("after idle"), Done: done}); err != nil {
		t.Fatal(err)
	}
	in := rb.next(t, time.Minute)
	defer in.Release()
	if string(in.Meta) != "after idle" {
		t.Fatalf("got %q", in.Meta)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
