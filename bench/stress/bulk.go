package stress

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/starwire/starwire/wire"
)

// Bulk returns issue 9's two-way bulk workload: 40 callers on one
// connection echoing 4–16 MiB tensors for d, a quarter of the calls with
// deadlines short enough (20ms–2s) to pass while their frames are queued,
// half written or half answered.
func Bulk(name string, d time.Duration) Workload {
	return Workload{
		Name:     name,
		Callers:  40,
		MinSize:  4 << 20,
		MaxSize:  16 << 20,
		Ops:      []Op{OpEcho},
		Deadline: 10 * time.Second,
		Short:    0.25, ShortMin: 20 * time.Millisecond, ShortMax: 2 * time.Second,
		Duration: d,
		Seed:     uint64(time.Now().UnixNano()),
	}
}

// BulkCalls is Bulk as a fixed amount of work: each of the 40 callers
// makes calls echoes of 4–16 MiB drawn from seed, all with the long
// deadline, so that every call completes and two runs of the same seed
// move the same bytes whatever their speed.
func BulkCalls(name string, calls int, seed uint64) Workload {
	w := Bulk(name, 0)
	w.Short, w.ShortMin, w.ShortMax = 0, 0, 0
	w.Calls, w.Seed, w.Deadline = calls, seed, 30*time.Second
	return w
}

// schedWakeups is how many wake-ups Problems allows a late machine to
// delay a call that gives up.
const schedWakeups = 3

// Problems lists how r misses the bar of a run of w: calls hung, answers
// corrupted, failures with codes other than ok, a call returning more than
// maxOverrun after its deadline, or fewer than half the calls (or than one
// per caller) answered, which deadlines that all pass would otherwise hide.
// A machine too busy to run the client process on time is not the code's
// doing: a call giving up crosses a few wake-ups (its deadline's timer, the
// hand-over of the connection's lock, the end of a write it withdraws from),
// each of which can take as long as the longest any goroutine of the
// client's or the server's process woke late (SchedLate, ServerLate: a
// late server drains a write the call waits out late), so schedWakeups
// times the larger is added to maxOverrun, and both are named. On an idle machine SchedLate is a few
// milliseconds; an overrun of seconds fails on any.
func (r *Report) Problems(w Workload, maxOverrun time.Duration, ok ...wire.Code) []string {
	var ps []string
	if r.Hung > 0 {
		ps = append(ps, fmt.Sprintf("%d calls hung, the oldest for %v", r.Hung, r.OldestHung))
	}
	if r.Corrupted > 0 {
		ps = append(ps, fmt.Sprintf("%d answers corrupted: %v", r.Corrupted, r.Errors))
	}
	if n := r.Failed(ok...); n > 0 {
		ps = append(ps, fmt.Sprintf("%d calls failed with unexpected codes: %s %v", n, r.CodeSummary(), r.Errors))
	}
	late := max(r.SchedLate, r.ServerLate)
	if allowed := maxOverrun + schedWakeups*late; r.MaxOverrun > allowed {
		o := r.Overran
		ps = append(ps, fmt.Sprintf("a %v call of %d bytes returned %v after its deadline of %v, over %v (%v plus %d× the %v the machine made the client (%v) or the server (%v) wait) (%v)",
			o.Op, o.Size, r.MaxOverrun, o.Deadline, allowed, maxOverrun, schedWakeups, late, r.SchedLate, r.ServerLate, o.Err))
	}
	if r.OK < r.Calls/2 || r.OK < int64(w.Callers) {
		ps = append(ps, fmt.Sprintf("only %d of %d calls answered", r.OK, r.Calls))
	}
	return ps
}

// DumpAll writes every goroutine of this process and of p to w; SIGQUIT
// ends p.
func DumpAll(w io.Writer, p *Proc, label string) {
	buf := make([]byte, 64<<20)
	buf = buf[:runtime.Stack(buf, true)]
	fmt.Fprintf(w, "=== goroutines of the client process (%s)\n%s\n", label, buf)
	fmt.Fprintf(w, "=== goroutines of the server process (%s)\n%s\n", label, p.Dump())
}
