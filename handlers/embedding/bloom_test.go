package embedding

import (
	"math"
	"testing"
)

// TestBloomFilterFor checks the sizing: a million ids at 1% take 9.6M
// counters and 7 hashes, and the rate the sized filter states is the one
// asked.
func TestBloomFilterFor(t *testing.T) {
	b, err := BloomFilterFor(1_000_000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if b.Hashes != 7 || b.Counters < 9_500_000 || b.Counters > 9_700_000 {
		t.Fatalf("filter %+v, want 7 hashes and about 9.59M counters", b)
	}
	if p := b.FalsePositiveRate(1_000_000); math.Abs(p-0.01) > 0.001 {
		t.Fatalf("rate at 1M ids %v, want 0.01", p)
	}
	if _, err := BloomFilterFor(10, 1); err == nil {
		t.Fatal("a rate of 1 was accepted")
	}
}

// TestBloomAdmission checks admission on the FilterFreq-th lookup, with
// gradients dropped before, in a filter too large for collisions.
func TestBloomAdmission(t *testing.T) {
	tab := newTable(t, Options{Dim: 1, Slots: []float32{0.1}, Init: Initializer{Constant: 2}, FilterFreq: 3, Bloom: &BloomFilter{Counters: 1 << 20, Hashes: 4}})
	for lookup := 1; lookup <= 3; lookup++ {
		if n, _ := tab.ApplyAdagrad([]int64{77}, []float32{1}, 0.1, 1); n != 0 {
			t.Fatalf("before lookup %d: a gradient was applied", lookup)
		}
		if got := gather(t, tab, 77); got[0] != 2 {
			t.Fatalf("lookup %d: %v, want the initializer's 2", lookup, got)
		}
		if want := map[bool]int{true: 1, false: 0}[lookup == 3]; tab.Len() != want {
			t.Fatalf("after lookup %d: %d rows, want %d", lookup, tab.Len(), want)
		}
	}
	s := tab.Snapshot()
	if s.Freqs[0] != 3 || len(s.FilteredIDs) != 0 {
		t.Fatalf("freq %d, filtered %v; want 3, none", s.Freqs[0], s.FilteredIDs)
	}
}

// TestBloomFalsePositiveRate measures the ids admitted early: once n
// distinct ids were looked up once each, the share of new ids a first
// lookup admits with FilterFreq 2 must be the rate the filter states
// (between its rate at n ids and at n plus the new ones: the new ones
// fill it too). The ids are fixed, so the share is too.
func TestBloomFalsePositiveRate(t *testing.T) {
	const n, fresh = 50_000, 5_000
	b, err := BloomFilterFor(n, 0.02)
	if err != nil {
		t.Fatal(err)
	}
	tab := newTable(t, Options{Dim: 1, FilterFreq: 2, Bloom: &b})
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(mix(uint64(i)))
	}
	gather(t, tab, ids...)
	before := tab.Len()
	for i := range ids[:fresh] {
		ids[i] = int64(mix(uint64(n + i)))
	}
	gather(t, tab, ids[:fresh]...)
	rate := float64(tab.Len()-before) / fresh
	lo, hi := b.FalsePositiveRate(n), b.FalsePositiveRate(n+fresh)
	t.Logf("filter %+v: %.4f of new ids admitted early; stated rate %.4f at %d ids, %.4f at %d", b, rate, lo, n, hi, n+fresh)
	if rate < 0.8*lo || rate > 1.2*hi {
		t.Fatalf("%.4f of new ids admitted early, want between %.4f and %.4f", rate, lo, hi)
	}
}

// TestBloomBoundsMemory checks that lookups of ids never admitted
// allocate nothing with a Bloom filter: what they cost is its counters.
func TestBloomBoundsMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers")
	}
	tab := newTable(t, Options{Dim: 4, FilterFreq: 1000, Bloom: &BloomFilter{Counters: 1 << 16, Hashes: 3}})
	ids, out := make([]int64, 1000), make([]float32, 4000)
	next := int64(0)
	allocs := testing.AllocsPerRun(20, func() {
		for i := range ids {
			next++
			ids[i] = next
		}
		_ = tab.Gather(ids, out)
	})
	if allocs != 0 || tab.Len() != 0 {
		t.Fatalf("lookups of new ids: %v allocations, %d rows; want 0, 0", allocs, tab.Len())
	}
}

// TestBloomCountersRestored checks that a snapshot holds the Bloom
// filter's counters and a restore takes them back: an id seen twice
// before the snapshot is admitted by its third lookup after it, in a
// table of the same filter; one of another filter starts empty.
func TestBloomCountersRestored(t *testing.T) {
	opts := Options{Dim: 1, FilterFreq: 3, Bloom: &BloomFilter{Counters: 1 << 16, Hashes: 3}}
	tab := newTable(t, opts)
	gather(t, tab, 5, 5)
	s := tab.Snapshot()
	if len(s.Bloom) != 1<<16 {
		t.Fatalf("snapshot of %d counters, want %d", len(s.Bloom), 1<<16)
	}
	fresh := newTable(t, opts)
	if err := fresh.Restore(s); err != nil {
		t.Fatal(err)
	}
	if gather(t, fresh, 5); fresh.Len() != 1 {
		t.Fatalf("third lookup after the restore: %d rows, want 1", fresh.Len())
	}
	other := opts
	other.Bloom = &BloomFilter{Counters: 1 << 12, Hashes: 3}
	fresh = newTable(t, other)
	if err := fresh.Restore(s); err != nil {
		t.Fatal(err)
	}
	if gather(t, fresh, 5); fresh.Len() != 0 {
		t.Fatalf("a filter of another size took the counters: %d rows, want 0", fresh.Len())
	}
	a, b := []uint8{1, 200, 0}, []uint8{2, 100, 0}
	if MergeBloom(a, b); a[0] != 3 || a[1] != 255 || a[2] != 0 {
		t.Fatalf("merged counters %v, want [3 255 0]", a)
	}
}

// TestBloomCountersByPart checks the layout a checkpoint saves the
// counters in, whatever the table's shards: the counters of an id are in
// the part its hash's top 6 bits name, at the places its second hash
// gives within the part's Counters/64.
func TestBloomCountersByPart(t *testing.T) {
	const parts, per, hashes = 64, 128, 3
	tab := newTable(t, Options{Dim: 1, FilterFreq: 5, Bloom: &BloomFilter{Counters: parts * per, Hashes: hashes}})
	ids := []int64{1, 2, 3, 1 << 40, -7, 123456789}
	for _, id := range ids {
		gather(t, tab, id)
	}
	want := make([]uint8, parts*per)
	for _, id := range ids {
		h := mix(uint64(id))
		g := mix(h ^ 0x5851f42d4c957f2d)
		h1, h2 := g&0xffffffff, g>>32|1
		part := want[int(h>>58)*per:][:per]
		for i := range uint64(hashes) {
			part[(h1+i*h2)%per]++
		}
	}
	got := tab.Snapshot().Bloom
	if len(got) != len(want) {
		t.Fatalf("%d counters saved, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("counter %d (part %d) is %d, want %d", i, i/per, got[i], want[i])
		}
	}
}
