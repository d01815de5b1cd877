package clicks

import (
	"math"
	"math/rand/v2"
)

// headValues bounds the values a popularity table holds one by one: the
// most popular ones, which carry nearly all draws of a skewed field. The
// rest, the tail, is one entry of the table, drawn again by rejection.
const headValues = 1 << 16

// A popularity draws raw values v in [0, n) with probability proportional
// to (1+v)^-skew, the distribution rand.Zipf draws, in constant time: an
// alias table (Walker) over the head, built once per dataset and shared by
// its streams. rand.Zipf spends an Exp and a Log on every draw, which made
// drawing examples a fifth of a training job's CPU.
type popularity struct {
	slots []slot
	tail  uint32 // the slot standing for every value ≥ len(slots)-1, or none (len(slots))
	skew  float64
	n     uint64
}

// A slot of the alias table: a draw below cut (of 2^32) keeps the slot,
// else it takes alias. The two sit side by side, so that a draw, which
// lands on a slot at random in a table larger than the first-level caches,
// misses the cache once instead of once for each.
type slot struct{ cut, alias uint32 }

func newPopularity(skew float64, n int) *popularity {
	head := min(n, headValues)
	slots := head
	if n > head {
		slots++ // the tail's slot
	}
	w := make([]float64, slots)
	total := 0.0
	for v := range head {
		w[v] = math.Pow(1+float64(v), -skew)
		total += w[v]
	}
	if n > head {
		w[head] = tailMass(skew, head, n)
		total += w[head]
	}
	p := &popularity{slots: make([]slot, slots), tail: uint32(slots), skew: skew, n: uint64(n)}
	if n > head {
		p.tail = uint32(head)
	}
	p.build(w, total)
	return p
}

// tailMass is the sum of (1+v)^-skew over v in [head, n).
func tailMass(skew float64, head, n int) float64 {
	s := 0.0
	for v := head; v < n; v++ {
		s += math.Pow(1+float64(v), -skew)
	}
	return s
}

// build fills the alias table for weights w summing to total (Vose's
// method: every slot ends holding its own share and one other slot's).
func (p *popularity) build(w []float64, total float64) {
	k := float64(len(w))
	var small, large []uint32
	for i := range w {
		w[i] *= k / total
		if w[i] < 1 {
			small = append(small, uint32(i))
		} else {
			large = append(large, uint32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		p.slots[s] = slot{cut: uint32(w[s] * (1<<32 - 1)), alias: l}
		w[l] -= 1 - w[s]
		if w[l] < 1 {
			large, small = large[:len(large)-1], append(small, l)
		}
	}
	for _, i := range append(small, large...) { // rounding leftovers: whole
		p.slots[i] = slot{cut: math.MaxUint32, alias: i}
	}
}

// draw returns a value, from one 64-bit random number unless it lands on
// the tail, which tail draws (values from len(slots)-1 on).
func (p *popularity) draw(rng *rand.Rand, tail *rand.Zipf) uint64 {
	x := rng.Uint64()
	i := p.slotOf(x)
	i = p.slots[i].pick(x, i)
	if i == p.tail {
		return uint64(i) + tail.Uint64()
	}
	return uint64(i)
}

// slotOf is the slot a random number x falls in.
func (p *popularity) slotOf(x uint64) uint32 {
	return uint32((x >> 32) * uint64(len(p.slots)) >> 32)
}

// pick is the value x draws from s, the slot i it falls in: i, or its alias.
func (s slot) pick(x uint64, i uint32) uint32 {
	if uint32(x) >= s.cut {
		return s.alias
	}
	return i
}

// maxAhead is how many values drawAll draws ahead of resolving them.
const maxAhead = 8

// drawAll fills vs with values, the same that draw called len(vs) times on
// rng, whose source is src, would return. The table is larger than a
// core's cache, so each draw waits for a slot from memory; drawAll draws
// the random numbers of up to maxAhead values first and loads their slots
// together, so that those waits overlap, then resolves the values in order.
// A value that lands on the tail draws more random numbers from the same
// source, so the numbers drawn ahead after it were not the next values':
// the source is wound back to just after that value's number, and the
// values after it are drawn ahead again.
func (p *popularity) drawAll(vs []uint64, src *rand.PCG, tail *rand.Zipf) {
	var xs [maxAhead]uint64
	var is [maxAhead]uint32
	var ss [maxAhead]slot
	for len(vs) > 0 {
		k := min(len(vs), maxAhead)
		start := *src
		for j := range k {
			xs[j] = src.Uint64()
			is[j] = p.slotOf(xs[j])
			ss[j] = p.slots[is[j]]
		}
		j := 0
		for ; j < k; j++ {
			i := ss[j].pick(xs[j], is[j])
			if i != p.tail {
				vs[j] = uint64(i)
				continue
			}
			*src = start
			for range j + 1 {
				src.Uint64()
			}
			vs[j] = uint64(i) + tail.Uint64()
			j++
			break
		}
		vs = vs[j:]
	}
}

// tailZipf returns the draw of the tail for rng, nil when there is none:
// values head+j, j ≥ 0, with probability proportional to (1+head+j)^-skew.
func (p *popularity) tailZipf(rng *rand.Rand) *rand.Zipf {
	if p.tail == uint32(len(p.slots)) {
		return nil
	}
	return rand.NewZipf(rng, p.skew, float64(p.tail)+1, p.n-1-uint64(p.tail))
}
