package staleness

import (
	"fmt"
	"slices"
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
	// Corrupted counts pulled blobs whose stamp did not match their version.
	Corrupted int
}

func (r *Result) addWorker(s *workerStats) {
	r.Pull.merge(&s.pull)
	r.EmptyPulls += s.empty
	total := r.MeanStaleness*float64(r.Samples) + float64(s.staleSum)
	r.Samples += s.samples
	if r.Samples > 0 {
		r.MeanStaleness = total / float64(r.Samples)
	}
	r.MaxStaleness = max(r.MaxStaleness, s.staleMax)
	r.Corrupted += s.corrupted
}

// MovedBytes is the blob bytes pushed and pulled.
func (r *Result) MovedBytes() int64 {
	return int64(r.Push.Count()+r.Pull.Count()) * int64(r.Config.DataSize)
}

// String is the one-line summary the command prints.
func (r *Result) String() string {
	return fmt.Sprintf("%-8s mean staleness %.2f versions (max %d, %d samples); push %s; pull %s; %d versions, %d empty pulls, %.0f MB moved in %.1fs",
		r.Protocol, r.MeanStaleness, r.MaxStaleness, r.Samples, r.Push.String(), r.Pull.String(),
		r.Versions, r.EmptyPulls, float64(r.MovedBytes())/1e6, r.Elapsed.Seconds())
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
	return d[min(int(q*float64(len(d))), len(d)-1)]
}

func (t *timings) String() string {
	return fmt.Sprintf("n=%d mean %v p50 %v p99 %v", t.Count(), t.Mean().Round(time.Microsecond),
		t.Quantile(0.5).Round(time.Microsecond), t.Quantile(0.99).Round(time.Microsecond))
}
