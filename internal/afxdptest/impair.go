package afxdptest

import (
	"math/rand/v2"
	"time"

	"github.com/starwire/starwire/afxdp/link"
)

// Impairment describes faults Impair injects into received datagrams.
// Probabilities are in [0, 1].
type Impairment struct {
	// Loss drops a datagram; Reorder delivers it after the next batch;
	// Duplicate delivers it twice.
	Loss, Reorder, Duplicate float64
	// Seed makes the faults repeatable for the same arrivals.
	Seed uint64
}

// ImpairedLink wraps a link.Link and injects faults on its receive side. It
// exists for tests over real links where netem cannot reach (AF_XDP
// transmissions bypass the qdisc layer, and XDP runs before it on receive),
// and where the kernel has no netem.
type ImpairedLink struct {
	link.Link
	imp  Impairment
	rng  *rand.Rand
	tmp  []link.Datagram
	held []heldDatagram // delayed to the next Receive
	out  []heldDatagram // delivered by the last Receive, buffers to reuse
	free [][]byte

	// Counters of injected faults; read them after the reactor stopped.
	Dropped, Reordered, Duplicated uint64
}

type heldDatagram struct {
	buf  []byte
	from link.Datagram
}

// Impair returns l with imp applied to everything it receives.
func Impair(l link.Link, imp Impairment) *ImpairedLink {
	return &ImpairedLink{Link: l, imp: imp, rng: rand.New(rand.NewPCG(imp.Seed, 3))}
}

func (l *ImpairedLink) chance(p float64) bool { return p > 0 && l.rng.Float64() < p }

// Receive implements link.Link. Reordered datagrams are copied into buffers of
// the wrapper, since the inner link's views end with its next Receive.
func (l *ImpairedLink) Receive(pkts []link.Datagram) (int, error) {
	for _, h := range l.out {
		l.free = append(l.free, h.buf)
	}
	l.out = l.out[:0]
	k := 0
	// Datagrams held last time come first: the batch they were held from
	// has been delivered, so they arrive after it.
	for k < len(pkts) && k < len(l.held) {
		pkts[k] = l.held[k].from
		l.out = append(l.out, l.held[k])
		k++
	}
	l.held = l.held[:copy(l.held, l.held[k:])]
	if cap(l.tmp) < len(pkts) {
		l.tmp = make([]link.Datagram, len(pkts))
	}
	room := (len(pkts) - k) / 2 // a duplicate takes two slots
	if room == 0 {
		return k, nil
	}
	n, err := l.Link.Receive(l.tmp[:room])
	for _, d := range l.tmp[:n] {
		switch {
		case l.chance(l.imp.Loss):
			l.Dropped++
		case l.chance(l.imp.Reorder):
			l.Reordered++
			var buf []byte
			if m := len(l.free); m > 0 {
				buf, l.free = l.free[m-1], l.free[:m-1]
			}
			buf = append(buf[:0], d.Data...)
			l.held = append(l.held, heldDatagram{buf: buf, from: link.Datagram{Data: buf, From: d.From}})
		default:
			pkts[k] = d
			k++
			if l.chance(l.imp.Duplicate) {
				l.Duplicated++
				pkts[k] = d
				k++
			}
		}
	}
	return k, err
}

// Wait implements link.Link: with datagrams held back it does not sleep.
func (l *ImpairedLink) Wait(d time.Duration) error {
	if len(l.held) > 0 {
		return nil
	}
	return l.Link.Wait(d)
}
