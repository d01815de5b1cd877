package cpuclock

import (
	"errors"
	"os"
	"testing"
	"time"
)

// TestScheduled reads this process's CPU time, which grows as it works.
func TestScheduled(t *testing.T) {
	a, err := Scheduled(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	sink := 0
	for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
		sink++
	}
	b, err := Scheduled(os.Getpid())
	if err != nil || b <= a {
		t.Fatalf("CPU time %v then %v (%d turns), %v", a, b, sink, err)
	}
}

func TestParseSchedstat(t *testing.T) {
	if got, err := parseSchedstat([]byte("123456789 2000 17\n")); err != nil || got != 123456789 {
		t.Errorf("parseSchedstat = %v, %v; want 123.456789ms", got, err)
	}
	for _, bad := range []string{"", "\n", "x 1 2"} {
		if _, err := parseSchedstat([]byte(bad)); !errors.Is(err, errStat) {
			t.Errorf("parseSchedstat(%q): %v, want errStat", bad, err)
		}
	}
}
