package staleness

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Result is one protocol's measurements.
type Result struct {
	Protocol string
	Config   Config
	Elapsed  time.Duration
	// Versions is how many versions the trainer published.
	Versions uint64
	// Push times each version's push; Pull times each pull that moved a blob.
	Push, Pull timings
	// EmptyPulls found no newer version.
	EmptyPulls int
	// Samples, MeanStaleness and MaxStaleness describe the versions the
	// workers were behind the trainer, sampled every step interval.
	Samples       int
	MeanStaleness float64
	MaxStaleness  uint64
	// Stale counts the samples by versions behind (the last bucket: that
	// many or more).
	Stale [maxLag + 1]int
	// Corrupted counts pulled blobs whose stamp did not match their version.
	Corrupted int
}

func (r *Result) addWorker(s *workerStats) {
	if r.Config.Mode == ModePush {
		r.Push.merge(&s.pull) // each version's delivery to this worker
	} else {
		r.Pull.merge(&s.pull)
	}
	for i, n := range s.stale {
		r.Stale[i] += n
	}
	r.EmptyPulls += s.empty
	total := r.MeanStaleness*float64(r.Samples) + float64(s.staleSum)
	r.Samples += s.samples
	if r.Samples > 0 {
		r.MeanStaleness = total / float64(r.Samples)
	}
	r.MaxStaleness = max(r.MaxStaleness, s.staleMax)
	r.Corrupted += s.corrupted
}

// StaleQuantile returns the q-quantile (0..1) of the staleness samples,
// in versions behind; 0 without samples.
func (r *Result) StaleQuantile(q float64) int {
	total := 0
	for _, n := range r.Stale {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := max(int(math.Ceil(q*float64(total))), 1)
	seen := 0
	for lag, n := range r.Stale {
		if seen += n; seen >= rank {
			return lag
		}
	}
	return maxLag
}

// MBps is the blob megabytes moved per second of the run.
func (r *Result) MBps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.MovedBytes()) / 1e6 / r.Elapsed.Seconds()
}

// MovedBytes is the blob bytes pushed and pulled.
func (r *Result) MovedBytes() int64 {
	return int64(r.Push.Count()+r.Pull.Count()) * int64(r.Config.DataSize)
}

// Columns are the header lines of the command's table: what the columns
// mean, then their names. Every Result's String is one row under them.
func Columns(cfg Config) []string {
	return []string{
		fmt.Sprintf("columns: staleness = versions a worker's copy is behind the trainer's newest, sampled every %v (mean, p50, p99, max); "+
			"push = milliseconds to move one %.1f MB version (pull mode: trainer to parameter server; push mode: trainer to a worker's memory, each delivery), "+
			"pull = the same for a worker's pull that moved one, at %s (- where too few timings: p99 needs 100, run longer with --duration); "+
			"empty = pulls that found nothing newer; MB/s = versions moved per second; lower is better in every column but versions and MB/s",
			cfg.StepEvery, float64(cfg.DataSize)/(1<<20), percentileNames()),
		fmt.Sprintf("%-4s %-10s %7s %6s %4s %4s %5s %8s   %-26s   %-26s %8s %6s %8s",
			"mode", "protocol", "workers", "stale", "p50", "p99", "max", "samples", "push ms "+percentileNames(), "pull ms "+percentileNames(), "versions", "empty", "MB/s"),
	}
}

// String is the Result's row under Columns.
func (r *Result) String() string {
	return fmt.Sprintf("%-4s %-10s %7d %6.2f %4d %4d %5d %8d   %-26s   %-26s %8d %6d %8.1f",
		r.Config.mode(), r.Protocol, r.Config.Workers, r.MeanStaleness, r.StaleQuantile(0.5), r.StaleQuantile(0.99), r.MaxStaleness, r.Samples,
		r.Push.percentiles(), r.Pull.percentiles(), r.Versions, r.EmptyPulls, r.MBps())
}

// Compare is the closing line: how each starwire protocol in results did
// against gRPC, in mean staleness and median pull time. It is "" without
// gRPC and another protocol to compare.
func Compare(results []*Result) string {
	var base *Result
	for _, r := range results {
		if r.Protocol == ProtocolGRPC {
			base = r
		}
	}
	if base == nil {
		return ""
	}
	var parts []string
	for _, r := range results {
		if r == base {
			continue
		}
		// A pull moves a version in pull mode, a delivery (timed as push)
		// in push mode.
		what, mine, theirs := "pulls", &r.Pull, &base.Pull
		if r.Config.mode() == ModePush {
			what, mine, theirs = "deliveries", &r.Push, &base.Push
		}
		if theirs.Count() == 0 {
			parts = append(parts, fmt.Sprintf("%s %s than grpc (%.2f vs %.2f versions behind), grpc completed no %s",
				r.Protocol, ratio(r.MeanStaleness, base.MeanStaleness, "less stale", "more stale"), r.MeanStaleness, base.MeanStaleness, what))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s than grpc (%.2f vs %.2f versions behind), %s %s (median %s vs %s ms)",
			r.Protocol, ratio(r.MeanStaleness, base.MeanStaleness, "less stale", "more stale"), r.MeanStaleness, base.MeanStaleness,
			what, ratio(ms(mine.Quantile(0.5)), ms(theirs.Quantile(0.5)), "faster", "slower"),
			formatMS(mine.Quantile(0.5)), formatMS(theirs.Quantile(0.5))))
	}
	if len(parts) == 0 {
		return ""
	}
	return "comparison: " + strings.Join(parts, "; ")
}

// ratio says how many times a (lower is better) beat b: "2.7× less
// stale", "1.2× slower", "as fast".
func ratio(a, b float64, better, worse string) string {
	switch {
	case a == b:
		return "even"
	case a <= 0:
		return better + " (none against " + strconv.FormatFloat(b, 'f', 2, 64) + ")"
	case b <= 0:
		return worse
	case a < b:
		return fmt.Sprintf("%.1f× %s", b/a, better)
	}
	return fmt.Sprintf("%.1f× %s", a/b, worse)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func formatMS(d time.Duration) string { return strconv.FormatFloat(ms(d), 'f', 2, 64) }

// percentiles reported, each with the timings it needs: a q-quantile of
// fewer than 1/(1-q) timings is just the largest one.
var percentiles = []struct {
	q    float64
	name string
	need int
}{{0.5, "p50", 2}, {0.9, "p90", 10}, {0.99, "p99", 100}}

func percentileNames() string {
	names := make([]string, len(percentiles))
	for i, p := range percentiles {
		names[i] = p.name
	}
	return strings.Join(names, "/")
}

// timings collects durations. Safe for concurrent use.
type timings struct {
	mu sync.Mutex
	d  []time.Duration
}

func (t *timings) add(d time.Duration) {
	t.mu.Lock()
	t.d = append(t.d, d)
	t.mu.Unlock()
}

func (t *timings) merge(o *timings) {
	o.mu.Lock()
	d := slices.Clone(o.d)
	o.mu.Unlock()
	t.mu.Lock()
	t.d = append(t.d, d...)
	t.mu.Unlock()
}

// Count returns how many durations were recorded.
func (t *timings) Count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.d)
}

// Mean returns the mean duration, zero when none was recorded.
func (t *timings) Mean() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.d) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range t.d {
		sum += d
	}
	return sum / time.Duration(len(t.d))
}

// Quantile returns the q-quantile (0..1), zero when none was recorded.
func (t *timings) Quantile(q float64) time.Duration {
	t.mu.Lock()
	d := slices.Clone(t.d)
	t.mu.Unlock()
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	// Nearest rank: the smallest timing with at least q of them at or below it.
	rank := int(math.Ceil(q * float64(len(d))))
	return d[min(max(rank, 1), len(d))-1]
}

// percentiles writes the percentiles in milliseconds, "-" for those with
// too few timings: "4.10/6.25/-".
func (t *timings) percentiles() string {
	n := t.Count()
	out := make([]string, len(percentiles))
	for i, p := range percentiles {
		out[i] = "-"
		if n >= p.need {
			out[i] = formatMS(t.Quantile(p.q))
		}
	}
	return strings.Join(out, "/")
}

// CompareModes is the closing line of a run of both modes: for each
// protocol and worker count run both ways, the staleness p50 and mean of
// push against pull. It is "" without such a pair.
func CompareModes(results []*Result) string {
	type key struct {
		protocol string
		workers  int
	}
	pull := map[key]*Result{}
	for _, r := range results {
		if r.Config.mode() == ModePull {
			pull[key{r.Protocol, r.Config.Workers}] = r
		}
	}
	var parts []string
	for _, r := range results {
		p, ok := pull[key{r.Protocol, r.Config.Workers}]
		if r.Config.mode() != ModePush || !ok {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d workers: p50 %d vs %d, mean %.2f vs %.2f",
			r.Protocol, r.Config.Workers, r.StaleQuantile(0.5), p.StaleQuantile(0.5), r.MeanStaleness, p.MeanStaleness))
	}
	if len(parts) == 0 {
		return ""
	}
	return "push against pull, staleness in versions behind: " + strings.Join(parts, "; ")
}
