package embedding

import (
	"fmt"
	"math"
)

// A BloomFilter admits ids by a counting Bloom filter instead of an exact
// count per id: memory bounded by the filter's size, however many ids are
// seen once and never again, at the cost of admitting some ids early.
//
// The counters are in 64 parts of Counters/64 saturating 8-bit counters
// each, an id's part the top 6 bits of its hash (a shard keeps the parts
// of its ids: see bloomParts); a lookup of an id without a row adds one
// to its Hashes counters in its part and admits it once the
// least of them reaches FilterFreq. An id is admitted early when other
// ids raised all its counters: with n distinct ids looked up, the chance
// that a new id's counters are all already non-zero (admitting it on its
// first lookup when FilterFreq is 2) is (1 - e^(-k n / m))^k for k
// hashes and m counters, the Bloom filter's false-positive rate; Sized
// picks m and k for a rate at a number of ids. The counter of an
// admitted id is not taken back: its row counts its lookups from then on.
type BloomFilter struct {
	Counters int // m, in all; rounded up to a multiple of 64
	Hashes   int // k
}

// BloomFilterFor returns the filter of the fewest counters whose
// false-positive rate is p once n distinct ids were looked up, as
// DeepRec's max_element_size and false_positive_probability ask.
func BloomFilterFor(n int, p float64) (BloomFilter, error) {
	if n <= 0 || !(p > 0 && p < 1) {
		return BloomFilter{}, fmt.Errorf("embedding: a Bloom filter for %d ids at a rate of %v: %w", n, p, ErrMismatch)
	}
	m := math.Ceil(-float64(n) * math.Log(p) / (math.Ln2 * math.Ln2))
	k := max(1, int(math.Round(m/float64(n)*math.Ln2)))
	return BloomFilter{Counters: int(m), Hashes: k}, nil
}

// FalsePositiveRate returns the filter's rate once n distinct ids were
// looked up.
func (b BloomFilter) FalsePositiveRate(n int) float64 {
	m, k := float64(b.perPart()*bloomParts), float64(b.Hashes)
	return math.Pow(1-math.Exp(-k*float64(n)/m), k)
}

// bloomParts is the number of parts of a filter's counters, by the top
// bits of an id's hash, each of perPart counters: the layout checkpoints
// save them in (bloomsnapshot.go), kept whatever the number of shards,
// each of which holds the consecutive parts of its ids.
const (
	bloomPartBits = 6
	bloomParts    = 1 << bloomPartBits
)

func (b BloomFilter) perPart() int { return max(1, (b.Counters+bloomParts-1)/bloomParts) }

// bloom is one shard's counters: its parts, one after another.
type bloom struct {
	counts []uint8
	hashes int
}

// partsPerShard is the parts of a filter's counters each shard keeps.
const partsPerShard = bloomParts / numShards

func (b BloomFilter) shard() *bloom {
	return &bloom{counts: make([]uint8, b.perPart()*partsPerShard), hashes: b.Hashes}
}

// add counts a lookup of the id of hash h and returns the least of its
// counters after. The k counters come from two halves of a second hash
// (Kirsch and Mitzenmacher's double hashing); the shard's choice took
// the first hash's top bits, which these do not reuse.
func (b *bloom) add(h uint64) int64 {
	g := mix(h ^ 0x5851f42d4c957f2d)
	h1, h2 := g&0xffffffff, g>>32|1
	m := uint64(len(b.counts) / partsPerShard)
	local := h >> (64 - bloomPartBits) & (partsPerShard - 1) // the part's place in its shard
	part := b.counts[local*m:][:m]
	least := uint8(math.MaxUint8)
	for i := range uint64(b.hashes) {
		c := &part[(h1+i*h2)%m]
		if *c < math.MaxUint8 {
			*c++
		}
		least = min(least, *c)
	}
	return int64(least)
}
