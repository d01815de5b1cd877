package cpuclock

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		stat string
		want Times
		err  bool
	}{
		{"1234 (go) S 1 1234 1234 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 8 0 1 1 1", Times{2500 * time.Millisecond, 500 * time.Millisecond}, false},
		{"1 (a) b) (c) R 0 1 1 0 -1 0 0 0 0 0 7 3 0 0", Times{70 * time.Millisecond, 30 * time.Millisecond}, false},
		{"1 (truncated) S 1 2", Times{}, true},
		{"no name at all", Times{}, true},
		{"1 (x) S 1 1 1 0 -1 0 0 0 0 0 u s 0 0", Times{}, true},
	}
	for _, tt := range tests {
		got, err := parseStat([]byte(tt.stat))
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("parseStat(%q) = %v, %v; want %v, error %v", tt.stat, got, err, tt.want, tt.err)
		}
		if err != nil && !errors.Is(err, errStat) {
			t.Errorf("parseStat(%q): %v does not wrap errStat", tt.stat, err)
		}
	}
}

// TestSelfAndOf: burning CPU shows in Self, and Of reads this process.
func TestSelfAndOf(t *testing.T) {
	before := Self()
	// Spin until the CPU time shows, bounded in wall time: on a loaded
	// machine 30ms of wall time may hold a few ms of CPU.
	for deadline := time.Now().Add(20 * time.Second); Self().Sub(before).User < 20*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("20s of spinning counted as %v of CPU", Self().Sub(before))
		}
		for start := time.Now(); time.Since(start) < time.Millisecond; {
		}
	}
	if _, err := Of(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(-1); err == nil {
		t.Fatal("Of(-1) read something")
	}
	if both, err := SelfAnd(os.Getpid()); err != nil || both.User < 2*before.User {
		t.Fatalf("SelfAnd(self) = %v, %v; want at least twice %v", both, err, before.User)
	}
	if _, err := SelfAnd(-1); err == nil {
		t.Fatal("SelfAnd(-1) read something")
	}
}
