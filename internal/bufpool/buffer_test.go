package bufpool

import (
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

func BenchmarkGetRelease(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Get(1 << 20).Release()
	}
}
