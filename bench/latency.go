package bench

import (
	"slices"
	"time"
)

// Samples records per-call latencies into storage allocated up front, so
// that measuring adds no allocation to the calls it measures. When the
// storage is full, every other sample is dropped and from then on only every
// second call is kept (then every fourth, ...), so the samples stay spread
// evenly over the whole run however long it is. Not safe for concurrent use:
// give each caller its own, then Merge.
type Samples struct {
	ns     []int64
	stride int
	seen   int
}

// NewSamples returns a recorder with room for room samples.
func NewSamples(room int) *Samples {
	return &Samples{ns: make([]int64, 0, max(room, 2)), stride: 1}
}

// Add records one call's latency.
func (s *Samples) Add(d time.Duration) {
	if s.seen%s.stride == 0 {
		if len(s.ns) == cap(s.ns) {
			s.halve()
		}
		if s.seen%s.stride == 0 {
			s.ns = append(s.ns, int64(d))
		}
	}
	s.seen++
}

// halve keeps every other sample and doubles the stride.
func (s *Samples) halve() {
	n := 0
	for i := 0; i < len(s.ns); i += 2 {
		s.ns[n] = s.ns[i]
		n++
	}
	s.ns = s.ns[:n]
	s.stride *= 2
}

// Count returns the number of calls recorded, kept or not.
func (s *Samples) Count() int { return s.seen }

// Len returns the number of samples kept.
func (s *Samples) Len() int { return len(s.ns) }

// Merge appends the samples of others to s (allocating as needed; call it
// after the measurement).
func (s *Samples) Merge(others ...*Samples) {
	for _, o := range others {
		s.ns = append(s.ns, o.ns...)
		s.seen += o.seen
	}
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of the samples, or
// 0 when there are none. It sorts the samples in place.
func (s *Samples) Percentile(p float64) time.Duration {
	if len(s.ns) == 0 {
		return 0
	}
	slices.Sort(s.ns)
	i := int(float64(len(s.ns))*p/100+0.5) - 1
	i = min(max(i, 0), len(s.ns)-1)
	return time.Duration(s.ns[i])
}
