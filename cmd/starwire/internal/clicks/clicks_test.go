package clicks

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
	"testing"
)

func TestStreamsAreDeterministicAndIndependent(t *testing.T) {
	g, err := New(DefaultConfig(1000, 7))
	if err != nil {
		t.Fatal(err)
	}
	var a, b, c Batch
	g.Stream(0).Fill(&a, 64)
	g.Stream(0).Fill(&b, 64)
	g.Stream(1).Fill(&c, 64)
	if !slices.Equal(a.IDs, b.IDs) || !slices.Equal(a.Labels, b.Labels) {
		t.Error("stream 0 differs between two draws with the same seed")
	}
	if slices.Equal(a.IDs, c.IDs) {
		t.Error("streams 0 and 1 drew the same ids")
	}
	for _, id := range a.IDs {
		if id < 0 || id >= 1000 {
			t.Fatalf("id %d outside the vocabulary", id)
		}
	}
}

func TestTaskIsLearnable(t *testing.T) {
	g, err := New(DefaultConfig(5000, 1))
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	g.Stream(3).Fill(&b, 20000)
	clicks := 0
	for _, y := range b.Labels {
		clicks += int(y)
	}
	rate := float64(clicks) / float64(b.Len())
	if rate < 0.2 || rate > 0.6 {
		t.Errorf("click rate %.2f, want between 0.2 and 0.6", rate)
	}
	// The hidden model must beat predicting the base rate by a wide margin,
	// or a learner has nothing to find.
	base := 0.0
	for _, y := range b.Labels {
		base += LogLoss(rate, y)
	}
	base /= float64(b.Len())
	if bayes := g.BayesLoss(&b); bayes > 0.8*base {
		t.Errorf("hidden model loss %.3f vs base-rate loss %.3f: too little signal", bayes, base)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Vocab: 0, Fields: 1, Values: 1, Skew: 1.1},
		{Vocab: 1, Fields: 0, Values: 1, Skew: 1.1},
		{Vocab: 1, Fields: 1, Values: 0, Skew: 1.1},
		{Vocab: 1, Fields: 1, Values: 1, Skew: 1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

// TestStreamDrawsPinned: the default job's first batches, as a checksum of
// their ids and labels, do not change, so that a run of "starwire train"
// trains on the same examples from one build to the next and its losses
// can be compared.
func TestStreamDrawsPinned(t *testing.T) {
	g, err := New(DefaultConfig(100000, 1))
	if err != nil {
		t.Fatal(err)
	}
	s := g.Stream(1)
	var b Batch
	h := fnv.New64a()
	for range 64 {
		s.Fill(&b, 256)
		for _, id := range b.IDs {
			binary.Write(h, binary.LittleEndian, id)
		}
		binary.Write(h, binary.LittleEndian, b.Labels)
	}
	const want uint64 = 0xd43719a5c5061f03
	if got := h.Sum64(); got != want {
		t.Errorf("checksum of stream 1's first 64 batches %#x, want %#x", got, want)
	}
}

// BenchmarkFill draws one batch of the default job: 256 examples of 8
// fields over 100,000 ids.
func BenchmarkFill(b *testing.B) {
	g, err := New(DefaultConfig(100000, 1))
	if err != nil {
		b.Fatal(err)
	}
	s := g.Stream(1)
	var batch Batch
	b.ReportAllocs()
	for b.Loop() {
		s.Fill(&batch, 256)
	}
}

// TestFillPausingIsFill: pausing changes neither the examples nor the
// stream's state after them, and pause is called between chunks only.
func TestFillPausingIsFill(t *testing.T) {
	g, err := New(DefaultConfig(100000, 5))
	if err != nil {
		t.Fatal(err)
	}
	plain, paused := g.Stream(2), g.Stream(2)
	var a, b Batch
	for _, tc := range []struct{ n, chunk, pauses int }{{256, 32, 7}, {100, 32, 3}, {64, 64, 0}, {5, 1, 4}, {10, 100, 0}} {
		plain.Fill(&a, tc.n)
		pauses := 0
		paused.FillPausing(&b, tc.n, tc.chunk, func() { pauses++ })
		if !slices.Equal(a.IDs, b.IDs) || !slices.Equal(a.Labels, b.Labels) {
			t.Fatalf("n %d, chunk %d: the examples differ", tc.n, tc.chunk)
		}
		if pauses != tc.pauses {
			t.Errorf("n %d, chunk %d: %d pauses, want %d", tc.n, tc.chunk, pauses, tc.pauses)
		}
	}
}

// TestFeatureIDs: Enumerated and Hash64 draw the same examples and labels
// under other ids, one id per feature: Enumerated's in the vocabulary,
// Hash64's non-negative and spread over 63 bits; and the default data is not
// theirs (its weights are of hashed ids).
func TestFeatureIDs(t *testing.T) {
	cfg := DefaultConfig(1000, 3)
	cfg.Values = 500
	cfg.IDs = Enumerated
	cfg.Vocab = cfg.Fields * cfg.Values
	enum, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.IDs, cfg.Vocab = Hash64, 0
	h64, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var a, b Batch
	enum.Stream(2).Fill(&a, 4096)
	h64.Stream(2).Fill(&b, 4096)
	if !slices.Equal(a.Labels, b.Labels) {
		t.Fatal("enumerated and hash64 ids drew different labels")
	}
	if ea, eb := enum.BayesLoss(&a), h64.BayesLoss(&b); ea != eb {
		t.Errorf("hidden model's loss %v with enumerated ids, %v with hash64", ea, eb)
	}
	// The same feature has the same id, and different features different
	// ids, in both.
	toHash := map[int64]int64{}
	high, big := 0, 0
	for i, e := range a.IDs {
		h := b.IDs[i]
		if e < 0 || e >= int64(enum.Config().Vocab) {
			t.Fatalf("enumerated id %d outside [0, %d)", e, enum.Config().Vocab)
		}
		if prev, ok := toHash[e]; ok && prev != h {
			t.Fatalf("feature %d has hash64 ids %d and %d", e, prev, h)
		}
		toHash[e] = h
		if h < 0 {
			t.Fatalf("hash64 id %d is negative", h)
		}
		if h >= 1<<62 {
			high++
		}
		if h > 1<<40 {
			big++
		}
	}
	seen := map[int64]bool{}
	for _, h := range toHash {
		if seen[h] {
			t.Fatalf("two features share hash64 id %d", h)
		}
		seen[h] = true
	}
	if n := len(a.IDs); high < n/4 || big < n*9/10 {
		t.Errorf("of %d hash64 ids %d at or above 2^62 and %d beyond 2^40: not spread over 63 bits", n, high, big)
	}
	var want [32]byte
	if got, w := h64.ID(3, 17, &want), int64(fnv1a([]byte("f3=17"))); got != w {
		t.Errorf("id of field 3 value 17 is %d, want FNV-1a of \"f3=17\", %d", got, w)
	}
	s := h64.Stream(4)
	s.Fill(&b, 256)
	if allocs := testing.AllocsPerRun(10, func() { s.Fill(&b, 256) }); allocs != 0 {
		t.Errorf("drawing a batch of hash64 ids allocates %v times", allocs)
	}
}
