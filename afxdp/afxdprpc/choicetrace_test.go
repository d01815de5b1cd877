package afxdprpc

import (
	"bytes"
	"strings"
	"testing"

	"github.com/starwire/starwire/wire"
)

// TestChooserCallAllocatesNothing: with the trace off, a call through the
// chooser, probes and judgements included, allocates nothing.
func TestChooserCallAllocatesNothing(t *testing.T) {
	c := newTestChooser(PathPolicy{})
	m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 7}, Meta: make([]byte, 64)}
	h := &wire.Header{Kind: wire.KindResponse, Method: 7, PayloadLen: 64}
	var id uint64
	call := func() {
		id++
		m.Header.CallID, h.CallID = id, id
		c.choose(m, true)
		c.answered(h)
	}
	for range 100 {
		call()
	}
	if n := testing.AllocsPerRun(2000, call); n != 0 {
		t.Fatalf("a call through the chooser allocates %v times", n)
	}
}

// TestChooserTraceWritesEvents: on, the trace writes a line per probe
// burst, judgement and CPU window.
func TestChooserTraceWritesEvents(t *testing.T) {
	c := newTestChooser(PathPolicy{})
	var buf bytes.Buffer
	c.trace = &chooserTrace{w: &buf, conn: 1}
	for id := uint64(1); id <= 200; id++ {
		c.call(id, 64, 64, 10_000)
	}
	for _, ev := range []string{"event=burst", "event=judge", "event=cpu"} {
		if !strings.Contains(buf.String(), ev) {
			t.Errorf("no %s line in the trace:\n%s", ev, buf.String())
		}
	}
}
