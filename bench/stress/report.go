package stress

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/starwire/starwire/wire"
)

// stats is what one caller saw; guarded by its caller's mutex.
type stats struct {
	calls, ok, corrupted, cancelled int64
	codes                           map[wire.Code]int64
	verified                        int64
	maxOverrun                      time.Duration
	overrun                         Record // the call that overran the most
	lat                             []time.Duration
	seen                            int64 // latencies offered to lat
	errs                            []string
}

// maxErrs bounds the distinct error messages a report keeps.
const maxErrs = 8

func (s *stats) record(r *Record, rng *rand.Rand) {
	s.calls++
	if r.Cancelled {
		s.cancelled++
	}
	if r.Overrun > s.maxOverrun {
		s.maxOverrun, s.overrun = r.Overrun, *r
	}
	switch {
	case r.Err == nil:
		s.ok++
		s.verified += r.Verified
		// Reservoir sampling keeps a uniform sample of the latencies.
		s.seen++
		if len(s.lat) < sampleRoom {
			s.lat = append(s.lat, r.Latency)
		} else if j := rng.Int64N(s.seen); j < sampleRoom {
			s.lat[j] = r.Latency
		}
	case errors.Is(r.Err, ErrCorrupted):
		s.corrupted++
		s.note(r.Err)
	default:
		if s.codes == nil {
			s.codes = make(map[wire.Code]int64)
		}
		s.codes[r.Code]++
		if r.Code != wire.DeadlineExceeded && r.Code != wire.Cancelled {
			s.note(r.Err)
		}
	}
}

func (s *stats) note(err error) {
	msg := err.Error()
	if len(s.errs) < maxErrs && !slices.Contains(s.errs, msg) {
		s.errs = append(s.errs, msg)
	}
}

// A Report sums up a Workload's run.
type Report struct {
	Name    string
	Elapsed time.Duration
	Calls   int64               // calls that returned
	OK      int64               // calls answered and verified
	Codes   map[wire.Code]int64 // calls that failed, by status code
	// Corrupted counts calls that returned OK with a wrong answer.
	Corrupted int64
	Cancelled int64 // calls the workload cancelled (any outcome)
	// BytesVerified counts the answer bytes checked against their pattern.
	BytesVerified int64
	// MaxOverrun is the longest a call returned after its deadline, and
	// Overran that call.
	MaxOverrun time.Duration
	Overran    Record
	// P50, P99 and Max are the latencies of the calls that succeeded.
	P50, P99, Max time.Duration
	// Hung counts calls still in flight when Run stopped waiting, and
	// OldestHung is how long the oldest of them had been.
	Hung       int
	OldestHung time.Duration
	Errors     []string // distinct messages of unexpected failures, a few
	// SchedLate is the longest a sleeping goroutine of the client process
	// woke past its time during the run: the machine's share of any
	// overrun.
	SchedLate time.Duration
	// ServerLate is the same of the server's process (see MethodLate),
	// zero where the server does not answer MethodLate.
	ServerLate time.Duration
}

func (r *Report) add(s *stats) {
	r.Calls += s.calls
	r.OK += s.ok
	r.Corrupted += s.corrupted
	r.Cancelled += s.cancelled
	r.BytesVerified += s.verified
	for c, n := range s.codes {
		r.Codes[c] += n
	}
	if s.maxOverrun > r.MaxOverrun {
		r.MaxOverrun, r.Overran = s.maxOverrun, s.overrun
	}
	for _, e := range s.errs {
		if len(r.Errors) < maxErrs && !slices.Contains(r.Errors, e) {
			r.Errors = append(r.Errors, e)
		}
	}
}

func (r *Report) setLatency(lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) time.Duration { return lat[min(int(p*float64(len(lat))), len(lat)-1)] }
	r.P50, r.P99, r.Max = at(0.50), at(0.99), lat[len(lat)-1]
}

// Failed returns the number of calls that failed with a code outside ok.
func (r *Report) Failed(ok ...wire.Code) int64 {
	var n int64
	for c, k := range r.Codes {
		if !slices.Contains(ok, c) {
			n += k
		}
	}
	return n
}

// CodeSummary formats the failures by code, "deadline exceeded=3 ...", or
// "-" when there are none.
func (r *Report) CodeSummary() string {
	if len(r.Codes) == 0 {
		return "-"
	}
	codes := make([]wire.Code, 0, len(r.Codes))
	for c := range r.Codes {
		codes = append(codes, c)
	}
	sort.Slice(codes, func(i, j int) bool { return codes[i] < codes[j] })
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%s=%d", strings.ReplaceAll(c.String(), " ", "-"), r.Codes[c]))
	}
	return strings.Join(parts, " ")
}

// FormatReports writes one table row per report, then each report's
// unexpected errors.
func FormatReports(w io.Writer, rs ...*Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tcalls\tok\tverified\tcorrupt\thung\tmax overrun\tsched late\tserver late\tp50\tp99\tmax\tfailures")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%v\t%v\t%v\t%v\t%v\t%v\t%s\n", r.Name, r.Calls, r.OK, MiB(r.BytesVerified),
			r.Corrupted, r.Hung, r.MaxOverrun.Round(time.Microsecond), r.SchedLate.Round(time.Microsecond), r.ServerLate.Round(time.Microsecond), r.P50.Round(time.Microsecond),
			r.P99.Round(time.Microsecond), r.Max.Round(time.Microsecond), r.CodeSummary())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rs {
		for _, e := range r.Errors {
			if _, err := fmt.Fprintf(w, "%s: %s\n", r.Name, e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Report) String() string {
	var b strings.Builder
	FormatReports(&b, r)
	return b.String()
}
