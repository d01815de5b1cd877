package bench

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

// FormatTable writes one comparison table of rs measured under cfg: calls,
// ops/s, p50, p99 and MB/s per contender, and how starwire's ops/s compare
// with each (the "starwire ×" column; "-" when there is no starwire row).
// A contender that failed gets a row of dashes and its error after the
// table.
func FormatTable(w io.Writer, cfg LoadConfig, rs []Result) error {
	fmt.Fprintf(w, "%s, %d B, %d in flight, %v per contender in %d turns\n", cfg.Mode, cfg.Size, cfg.Inflight, cfg.Duration, max(cfg.Rounds, 1))
	var base *Result
	for i := range rs {
		if rs[i].Name == "starwire" && rs[i].Err == nil {
			base = &rs[i]
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contender\tcalls\tops/s\tp50\tp99\tMB/s\tstarwire ×\t")
	var failed []Result
	for _, r := range rs {
		if r.Err != nil {
			fmt.Fprintf(tw, "%s\terror\t-\t-\t-\t-\t-\t\n", r.Name)
			failed = append(failed, r)
			continue
		}
		ratio := "-"
		if base != nil && r.OpsPerSec() > 0 {
			ratio = strconv.FormatFloat(base.OpsPerSec()/r.OpsPerSec(), 'f', 2, 64)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%.1f\t%s\t\n",
			r.Name, r.Calls, groupThousands(int64(r.OpsPerSec()+0.5)), micros(r.P50), micros(r.P99), r.MBPerSec(), ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range failed {
		if _, err := fmt.Fprintf(w, "%s: %v\n", r.Name, r.Err); err != nil {
			return err
		}
	}
	return nil
}

// FormatTurns writes, for a run of more than one turn, the p50 of each
// contender's turns in order, one line each starting with "turns", so that
// a turn that the machine slowed down (on a shared VM one-in-flight calls
// fall into a mode several times slower whenever the two processes' threads
// land on different, idle vCPUs) shows as such instead of only moving the
// run's p50.
func FormatTurns(w io.Writer, rs []Result) error {
	for _, r := range rs {
		if r.Err != nil || len(r.TurnP50) < 2 {
			continue
		}
		line := "turns p50 " + r.Name + ":"
		for _, d := range r.TurnP50 {
			line += " " + micros(d)
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// micros formats d in microseconds with one decimal.
func micros(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 1, 64) + "µs"
}

// groupThousands formats n with commas between groups of three digits.
func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
