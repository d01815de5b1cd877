package afxdprpc

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// chooserTrace writes what a connection's chooser does, one line an
// event, so that a run shows why auto mode sent calls where it did: its
// probe bursts, the judgement of each, its path switches and its CPU
// windows. It is on when STARWIRE_CHOOSER_TRACE=1; off, the chooser holds
// nil and each event costs one nil check.
type chooserTrace struct {
	w    io.Writer
	conn uint64
}

// traceConns numbers the connections traced, to tell their lines apart.
var traceConns atomic.Uint64

func newChooserTrace() *chooserTrace {
	if os.Getenv("STARWIRE_CHOOSER_TRACE") != "1" {
		return nil
	}
	return &chooserTrace{w: os.Stderr, conn: traceConns.Add(1)}
}

func pathName(p int) string {
	if p == viaBypass {
		return "afxdp"
	}
	return "tcp"
}

func (t *chooserTrace) printf(c *chooser, k int, format string, args ...any) {
	at := time.Since(c.epoch).Seconds()
	head := fmt.Sprintf("chooser conn=%d t=%.6f class=%s ", t.conn, at, formatSize(max(classBound(k)-1, 0))+"+")
	fmt.Fprintf(t.w, head+format+"\n", args...)
}

// traceBurst: class k starts a probe burst of n calls over the other
// path, its first warm not timed, the chosen path having depth in flight.
func (c *chooser) traceBurst(k, n, warm, depth int) {
	if c.trace == nil {
		return
	}
	c.trace.printf(c, k, "event=burst path=%s calls=%d warm=%d depth=%d",
		pathName(b2i(!c.bypass[k])), n, warm, depth)
}

// traceJudge: a burst of class k judged, the probed path's per-call
// cost oc against the chosen one's mc, and what came of it.
func (c *chooser) traceJudge(k int, mc, oc, margin float64, decision string) {
	if c.trace == nil {
		return
	}
	r, measured := c.cpuRatio(k)
	c.trace.printf(c, k, "event=judge path=%s calls=%d mine=%v other=%v cpu_ratio=%.2f measured=%v charged=%.2f margin=%.3f wins=%d decision=%s",
		pathName(b2i(c.bypass[k])), c.burstLen[k], time.Duration(mc), time.Duration(oc),
		r, measured, c.chargedRatio(k), margin, c.wins[k], decision)
}

// traceWindow: class k's CPU window w closed at the CPU clock's now, n
// answers in it, counted or dropped.
func (c *chooser) traceWindow(k int, w *cpuWindow, n uint64, now time.Duration, counted bool) {
	if c.trace == nil {
		return
	}
	per := time.Duration(0)
	if n > 0 {
		per = (now - w.cpu) / time.Duration(n)
	}
	r, _ := c.cpuRatio(k)
	c.trace.printf(c, k, "event=cpu path=%s calls=%d cpu_per_call=%v spoiled=%v counted=%v cpu_ratio=%.2f margin=%.3f",
		pathName(int(w.path)), n, per, w.spoiled, counted, r, c.margin(k))
}
