package clicks

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// IDs says how a feature, value v of field f, becomes the id an example
// holds.
type IDs int

const (
	// Hashed ids are a hash of (f, v) modulo Vocab, and the hidden weights
	// are of ids: features that share an id share its weight. The default
	// job's data.
	Hashed IDs = iota
	// Enumerated ids are f*Values+v modulo Vocab, and every feature has a
	// hidden weight of its own: a Vocab of Fields*Values or more holds
	// every feature in an id of its own, a vocabulary.
	Enumerated
	// Hash64 ids are the 64-bit FNV-1a hash of the feature's string
	// "f<f>=<v>" with its top bit cleared, with no vocabulary (Vocab is
	// not used). They are non-negative because DeepRec, restoring an
	// embedding variable into several partitions, keeps only ids whose
	// part (id % 1000) is non-negative. Every feature has a hidden weight
	// of its own: the examples and labels of Enumerated's, under other
	// ids.
	Hash64
)

func (k IDs) String() string {
	switch k {
	case Hashed:
		return "hashed"
	case Enumerated:
		return "enumerated"
	case Hash64:
		return "hash64"
	}
	return "IDs(" + strconv.Itoa(int(k)) + ")"
}

// Config describes a synthetic dataset.
type Config struct {
	// Vocab is the number of hashed feature ids, the embedding table's rows.
	Vocab int
	// Fields is the number of categorical features per example.
	Fields int
	// Values is the number of raw values per field before hashing.
	Values int
	// Skew is the power-law exponent of value popularity (> 1).
	Skew float64
	// Scale is the standard deviation of the hidden true weights.
	Scale float64
	// Seed fixes the true weights and, with a stream's index, every example.
	Seed uint64
	// IDs is how features become ids, Hashed by default.
	IDs IDs
}

// DefaultConfig returns a dataset sized for the vocabulary given.
func DefaultConfig(vocab int, seed uint64) Config {
	return Config{Vocab: vocab, Fields: 8, Values: max(vocab, 1), Skew: 1.2, Scale: 1.0, Seed: seed}
}

// A Generator holds a dataset's hidden truth. It is read-only after New, so
// streams may be used from many goroutines, one stream each.
type Generator struct {
	cfg  Config
	true []float32 // the hidden weight of every hashed id
	bias float32
	pop  *popularity // every field's values are equally skewed
}

// New returns the generator of cfg's dataset.
func New(cfg Config) (*Generator, error) {
	switch {
	case cfg.IDs < Hashed || cfg.IDs > Hash64:
		return nil, fmt.Errorf("clicks: ids %v, want hashed, enumerated or hash64", cfg.IDs)
	case cfg.Vocab <= 0 && cfg.IDs != Hash64:
		return nil, fmt.Errorf("clicks: vocabulary of %d ids, want > 0", cfg.Vocab)
	case cfg.Fields <= 0:
		return nil, fmt.Errorf("clicks: %d fields, want > 0", cfg.Fields)
	case cfg.Values <= 0:
		return nil, fmt.Errorf("clicks: %d values per field, want > 0", cfg.Values)
	case cfg.Skew <= 1:
		return nil, fmt.Errorf("clicks: skew %v, want > 1", cfg.Skew)
	}
	weights := cfg.Vocab
	if cfg.IDs != Hashed {
		weights = cfg.Fields * cfg.Values
	}
	g := &Generator{cfg: cfg, true: make([]float32, weights), pop: newPopularity(cfg.Skew, cfg.Values)}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7472756557)) // "trueW"
	for i := range g.true {
		g.true[i] = float32(rng.NormFloat64() * cfg.Scale)
	}
	// A negative bias makes clicks the minority, as they are.
	g.bias = -0.5
	return g, nil
}

// Config returns the dataset's configuration.
func (g *Generator) Config() Config { return g.cfg }

// ID returns the id of raw value v of field f, as cfg.IDs says; buf is
// scratch space for Hash64's string, so that drawing allocates nothing.
func (g *Generator) ID(f int, v uint64, buf *[32]byte) int64 {
	switch g.cfg.IDs {
	case Enumerated:
		return int64(g.feature(f, v) % uint64(g.cfg.Vocab))
	case Hash64:
		b := strconv.AppendInt(append(buf[:0], 'f'), int64(f), 10)
		b = strconv.AppendUint(append(b, '='), v, 10)
		return int64(fnv1a(b) &^ (1 << 63))
	}
	return g.Hash(f, v)
}

// fnv1a is the 64-bit FNV-1a hash of b.
func fnv1a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

// feature returns the index of value v of field f among every feature.
func (g *Generator) feature(f int, v uint64) uint64 { return uint64(f)*uint64(g.cfg.Values) + v }

// Hash returns the hashed id of raw value v of field f, the Hashed ids'.
func (g *Generator) Hash(f int, v uint64) int64 {
	// splitmix64 of (field, value): cheap and well mixed.
	x := uint64(f)<<40 ^ v ^ 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return int64(x % uint64(g.cfg.Vocab))
}

// TrueLogit returns the hidden model's logit for an example's ids, of
// Hashed ids alone (the others' weights are of features).
func (g *Generator) TrueLogit(ids []int64) float64 {
	s := float64(g.bias)
	for _, id := range ids {
		s += float64(g.true[id])
	}
	return s
}

// A Batch is examples in row-major form: IDs has Fields ids per example.
type Batch struct {
	IDs    []int64
	Labels []float32
	// logits are the hidden model's, per example, as Fill drew them.
	logits []float64
}

// Len returns the number of examples.
func (b *Batch) Len() int { return len(b.Labels) }

// A Stream draws examples; streams with different indices are independent.
// Not safe for concurrent use.
type Stream struct {
	g      *Generator
	rng    *rand.Rand
	src    *rand.PCG  // rng's source
	tail   *rand.Zipf // the popularity table's tail, nil when it has none
	values []uint64   // an example's values, one per field
	buf    [32]byte   // a feature's string, for Hash64
}

// Stream returns stream number i of the dataset.
func (g *Generator) Stream(i uint64) *Stream {
	src := rand.NewPCG(g.cfg.Seed^0x5eed, i+1)
	rng := rand.New(src)
	return &Stream{g: g, rng: rng, src: src, tail: g.pop.tailZipf(rng), values: make([]uint64, g.cfg.Fields)}
}

// Fill replaces b's contents with n fresh examples, reusing its storage.
func (s *Stream) Fill(b *Batch, n int) { s.FillPausing(b, n, n, nil) }

// FillPausing is Fill calling pause after every chunk examples but the
// last, so that a caller drawing batches in the background can let other
// work go first at those points; the examples are Fill's.
func (s *Stream) FillPausing(b *Batch, n, chunk int, pause func()) {
	F := s.g.cfg.Fields
	b.IDs = grow(b.IDs, n*F)
	b.Labels = grow(b.Labels, n)
	b.logits = grow(b.logits, n)
	for i := range n {
		if i > 0 && i%chunk == 0 && pause != nil {
			pause()
		}
		vs := s.values
		s.g.pop.drawAll(vs, s.src, s.tail)
		ids := b.IDs[i*F : (i+1)*F]
		for f := range ids {
			ids[f] = s.g.ID(f, vs[f], &s.buf)
		}
		z := s.g.trueLogit(ids, vs)
		b.logits[i] = z
		p := sigmoid(z)
		if s.rng.Float64() < p {
			b.Labels[i] = 1
		} else {
			b.Labels[i] = 0
		}
	}
}

// trueLogit returns the hidden model's logit for an example of ids, drawn
// from values vs.
func (g *Generator) trueLogit(ids []int64, vs []uint64) float64 {
	if g.cfg.IDs == Hashed {
		return g.TrueLogit(ids)
	}
	s := float64(g.bias)
	for f, v := range vs {
		s += float64(g.true[g.feature(f, v)])
	}
	return s
}

// BayesLoss returns the mean log loss of the hidden model itself on b, a
// batch Fill drew: the floor no learner can beat in expectation.
func (g *Generator) BayesLoss(b *Batch) float64 {
	var sum float64
	for i := range b.Len() {
		sum += LogLoss(sigmoid(b.logits[i]), b.Labels[i])
	}
	return sum / float64(max(b.Len(), 1))
}

// LogLoss is the log loss of predicting p for label y, with p clamped away
// from 0 and 1.
func LogLoss(p float64, y float32) float64 {
	p = min(max(p, 1e-7), 1-1e-7)
	if y > 0.5 {
		return -math.Log(p)
	}
	return -math.Log(1 - p)
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
