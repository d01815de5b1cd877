package xsk

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// fakeMapping lays out a ring the way the kernel does: producer, consumer
// and flags words, then the slots.
func fakeMapping[T any](size uint32) (m []byte, prod, cons, flags, desc uint64) {
	var zero T
	m = make([]byte, 64+int(size)*int(unsafe.Sizeof(zero)))
	return m, 0, 8, 16, 64
}

func newPair[T any](size uint32) (producer, consumer *ring[T]) {
	m, p, c, f, d := fakeMapping[T](size)
	producer, consumer = new(ring[T]), new(ring[T])
	initRing(producer, m, p, c, f, d, size)
	initRing(consumer, m, p, c, f, d, size)
	return producer, consumer
}

func TestRingReserveLimitsToFree(t *testing.T) {
	prod, cons := newPair[uint64](8)
	tests := []struct {
		name                 string
		reserve, consume     uint32
		wantGrant, wantAvail uint32
	}{
		{"fill half", 4, 0, 4, 4},
		{"fill to full, capped", 10, 0, 4, 8},
		{"full ring grants nothing", 1, 0, 0, 8},
		{"consume three", 0, 3, 0, 5},
		{"three free again, across the wrap", 5, 0, 3, 8},
	}
	for _, tt := range tests {
		if tt.reserve > 0 {
			idx, n := prod.reserve(tt.reserve)
			if n != tt.wantGrant {
				t.Fatalf("%s: granted %d, want %d", tt.name, n, tt.wantGrant)
			}
			for i := range n {
				*prod.slot(idx + i) = uint64(idx + i)
			}
			prod.submit(n)
		}
		if tt.consume > 0 {
			idx, n := cons.peek(tt.consume)
			for i := range n {
				if got := *cons.slot(idx + i); got != uint64(idx+i) {
					t.Fatalf("%s: slot %d holds %d", tt.name, idx+i, got)
				}
			}
			cons.release(n)
		}
		if _, avail := cons.peek(100); avail != tt.wantAvail {
			t.Fatalf("%s: %d available, want %d", tt.name, avail, tt.wantAvail)
		}
	}
}

func TestRingIndexWraparound(t *testing.T) {
	prod, cons := newPair[Desc](4)
	// Start the free-running indices just below the 32-bit wrap.
	start := ^uint32(0) - 5
	*prod.producer, *prod.consumer = start, start
	prod.cachedProd, prod.cachedCons = start, start
	cons.cachedProd, cons.cachedCons = start, start
	for round := range uint32(20) {
		idx, n := prod.reserve(3)
		if n != 3 {
			t.Fatalf("round %d: granted %d", round, n)
		}
		for i := range n {
			prod.slot(idx + i).Addr = uint64(round*3 + i)
		}
		prod.submit(n)
		idx, n = cons.peek(3)
		if n != 3 {
			t.Fatalf("round %d: peeked %d", round, n)
		}
		for i := range n {
			if got := cons.slot(idx + i).Addr; got != uint64(round*3+i) {
				t.Fatalf("round %d: got %d", round, got)
			}
		}
		cons.release(n)
	}
}

// TestRingConcurrent runs a producer and a consumer on separate goroutines
// over one mapping, as the process and the kernel do; under -race it checks
// that the release/acquire pairs order the slot accesses. How long the
// items take depends on the machine (under -race on a loaded one, over
// 20s); only a consumer that makes no progress for stall fails it.
func TestRingConcurrent(t *testing.T) {
	prod, cons := newPair[uint64](64)
	const total = 200000
	const stall = 10 * time.Second
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := uint64(0)
		for next < total && !stop.Load() {
			idx, n := prod.reserve(16)
			if n == 0 {
				runtime.Gosched() // full: let the consumer run
			}
			for i := range n {
				*prod.slot(idx + i) = next
				next++
			}
			prod.submit(n)
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	want := uint64(0)
	for progress := time.Now(); want < total; {
		idx, n := cons.peek(32)
		if n == 0 {
			if time.Since(progress) > stall {
				t.Fatalf("consumed %d of %d, then nothing for %v", want, total, stall)
			}
			runtime.Gosched() // empty: let the producer run
			continue
		}
		progress = time.Now()
		for i := range n {
			if got := *cons.slot(idx + i); got != want {
				t.Fatalf("got %d, want %d", got, want)
			}
			want++
		}
		cons.release(n)
	}
}

func TestRingNeedsWakeup(t *testing.T) {
	prod, _ := newPair[uint64](4)
	if prod.needsWakeup() {
		t.Fatal("flag set on a fresh ring")
	}
	*prod.flags = xdpRingNeedWakeup
	if !prod.needsWakeup() {
		t.Fatal("flag not seen")
	}
}

func TestFrameStack(t *testing.T) {
	s := newFrameStack(4, 2048)
	var got []uint64
	for {
		a, ok := s.pop()
		if !ok {
			break
		}
		got = append(got, a)
	}
	if len(got) != 4 || got[0] != 0 || got[3] != 3*2048 {
		t.Fatalf("popped %v", got)
	}
	s.push(4096)
	s.push(2048)
	if a, _ := s.pop(); a != 2048 {
		t.Fatalf("not LIFO: %d", a)
	}
	s.push(2048)
	s.push(0)
	s.push(6144)
	if s.push(0) {
		t.Fatal("push beyond capacity accepted")
	}
}

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name    string
		in      Config
		want    Config
		wantErr bool
	}{
		{"zero", Config{}, Config{FrameSize: 2048, NumFrames: 4096, FillSize: 2048, CompletionSize: 2048, RxSize: 2048, TxSize: 2048}, false},
		{"odd frame count", Config{NumFrames: 300}, Config{FrameSize: 2048, NumFrames: 300, FillSize: 128, CompletionSize: 128, RxSize: 128, TxSize: 128}, false},
		{"explicit rings", Config{FrameSize: 4096, NumFrames: 64, TxSize: 16}, Config{FrameSize: 4096, NumFrames: 64, FillSize: 32, CompletionSize: 32, RxSize: 32, TxSize: 16}, false},
		{"frame size not power of two", Config{FrameSize: 3000}, Config{}, true},
		{"frame too small", Config{FrameSize: 1024}, Config{}, true},
		{"ring not power of two", Config{RxSize: 100}, Config{}, true},
		{"one frame", Config{NumFrames: 1}, Config{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.withDefaults()
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v", err)
			}
			if err == nil && got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
