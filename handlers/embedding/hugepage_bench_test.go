package embedding

import (
	"flag"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

var tableBenchHuge = flag.Bool("table_bench_hugepages", false, "BenchmarkTable: collapse the gathers' memory into transparent huge pages (MADV_COLLAPSE) before measuring")

// collapse asks the kernel to back the whole 2 MiB pages of s with huge
// pages now, when -table_bench_hugepages is set: random rows of a table of
// hundreds of megabytes each miss the TLB with 4 KiB pages, and the Go
// heap does not ask for huge ones.
func collapse[E any](b *testing.B, s []E) {
	b.Helper()
	if !*tableBenchHuge || len(s) == 0 {
		return
	}
	const huge = 2 << 20
	start := unsafe.Pointer(&s[0])
	lo := (uintptr(start) + huge - 1) &^ (huge - 1)
	hi := (uintptr(start) + uintptr(len(s))*unsafe.Sizeof(s[0])) &^ (huge - 1)
	if hi <= lo {
		return
	}
	mem := unsafe.Slice((*byte)(unsafe.Add(start, lo-uintptr(start))), hi-lo)
	if err := unix.Madvise(mem, unix.MADV_COLLAPSE); err != nil {
		b.Logf("MADV_COLLAPSE of %d MiB: %v", len(mem)>>20, err)
	}
}
