package bufpool

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// rssBytes reads this process's resident set size.
func rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestMappedBuffersCostWhatIsWritten: a buffer sized from a peer's claim
// commits memory only as bytes land in it, and gives it back on release.
func TestMappedBuffersCostWhatIsWritten(t *testing.T) {
	const size, written = 1 << 30, 8 << 20
	before := rssBytes(t)
	b := Get(size)
	if !b.mapped || b.Len() != size {
		t.Fatalf("Get(%d): mapped %v, len %d", size, b.mapped, b.Len())
	}
	if uintptr(unsafe.Pointer(&b.Bytes()[0]))%Align != 0 {
		t.Fatal("mapped buffer not aligned")
	}
	data := b.Bytes()
	for i := 0; i < written; i += 4096 {
		data[i] = 1
	}
	during := rssBytes(t)
	b.Release()
	after := rssBytes(t)
	if grew := during - before; grew > 4*written {
		t.Errorf("RSS grew %d MiB for %d MiB written into a %d MiB buffer", grew>>20, written>>20, size>>20)
	}
	if after > during-written/2 {
		t.Errorf("RSS %d MiB after release, %d MiB before: the mapping's pages were not returned", after>>20, during>>20)
	}
	if Live() != 0 {
		t.Errorf("Live() = %d after release", Live())
	}
}
