package bufpool

import (
	"runtime"
	"testing"
	"unsafe"
)

func TestGetAlignedAndSized(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 4096, 1<<20 + 3, 3 << 20} {
		b := Get(n)
		if b.Len() != n {
			t.Errorf("Get(%d).Len() = %d", n, b.Len())
		}
		if n > 0 && uintptr(unsafe.Pointer(&b.Bytes()[0]))%Align != 0 {
			t.Errorf("Get(%d) not %d-byte aligned", n, Align)
		}
		b.Release()
	}
}

func TestClassOf(t *testing.T) {
	tests := []struct{ n, class int }{
		{0, 0}, {64, 0}, {65, 1}, {128, 1}, {129, 2}, {1 << 30, numClasses - 1}, {1<<30 + 1, -1},
	}
	for _, tt := range tests {
		if got := classOf(tt.n); got != tt.class {
			t.Errorf("classOf(%d) = %d, want %d", tt.n, got, tt.class)
		}
	}
}

func TestRefCounting(t *testing.T) {
	before := Live()
	b := Get(100)
	b.Ref()
	b.Release()
	if Live() != before+1 {
		t.Fatalf("buffer returned to pool while still referenced")
	}
	b.Release()
	if Live() != before {
		t.Fatalf("Live = %d, want %d", Live(), before)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("double Release did not panic")
		}
	}()
	b.Release()
}

func TestSteadyStateAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are asserted in the run without -race")
	}
	Get(4096).Release()
	if n := testing.AllocsPerRun(100, func() { Get(4096).Release() }); n != 0 {
		t.Fatalf("Get/Release allocates %v times", n)
	}
}

// TestLargeBuffersSurviveCollections: a large buffer released before a
// garbage collection is handed out again after it (a sync.Pool alone drops
// it), and the free lists keep no more than their bound.
func TestLargeBuffersSurviveCollections(t *testing.T) {
	tests := []struct {
		size, kept int
	}{
		{1 << 20, 32},
		{16 << 20, 2},
		{32 << 20, 1},
		{64 << 20, 0},
		{64 << 10, 0}, // small classes live in the sync.Pool only
	}
	for _, tt := range tests {
		c := classOf(tt.size)
		if got := retainLimit(c); got != tt.kept {
			t.Errorf("retainLimit(size %d) = %d, want %d", tt.size, got, tt.kept)
		}
		bufs := make([]*Buffer, tt.kept+2)
		for i := range bufs {
			bufs[i] = Get(tt.size)
		}
		for _, b := range bufs {
			b.Release()
		}
		runtime.GC()
		runtime.GC()
		runtime.GC()
		got := make(map[*Buffer]bool)
		for range bufs {
			b := Get(tt.size)
			got[b] = true
			defer b.Release()
		}
		reused := 0
		for _, b := range bufs {
			if got[b] {
				reused++
			}
		}
		if reused != tt.kept {
			t.Errorf("size %d: %d of %d released buffers came back after GC, want %d", tt.size, reused, len(bufs), tt.kept)
		}
	}
}

func BenchmarkGetRelease(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Get(1 << 20).Release()
	}
}
