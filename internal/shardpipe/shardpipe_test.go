package shardpipe

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestRunOrder checks the schedule: each shard with work gets load, find
// and use in that order, one step apart from its neighbours', and a shard
// without work gets none.
func TestRunOrder(t *testing.T) {
	var got []string
	rec := func(pass string) func(int) {
		return func(s int) { got = append(got, fmt.Sprintf("%s%d", pass, s)) }
	}
	Run(4, func(s int) bool { return s != 2 }, rec("L"), rec("F"), rec("U"))
	want := strings.Fields("L0 L1 F0 F1 U0 L3 U1 F3 U3")
	if !slices.Equal(got, want) {
		t.Fatalf("passes %v, want %v", got, want)
	}
}

// TestRunHoldsAtMostThree checks that, with load taking a shard and use
// releasing it, no more than three are held at once and each is taken
// above every one held.
func TestRunHoldsAtMostThree(t *testing.T) {
	held := map[int]bool{}
	Run(16, func(int) bool { return true }, func(s int) {
		for h := range held {
			if h > s {
				t.Fatalf("shard %d taken while %d is held", s, h)
			}
		}
		held[s] = true
		if len(held) > 3 {
			t.Fatalf("%d shards held", len(held))
		}
	}, func(int) {}, func(s int) { delete(held, s) })
	if len(held) != 0 {
		t.Fatalf("shards %v never released", held)
	}
}

func ExampleRun() {
	Run(3, func(int) bool { return true },
		func(s int) { fmt.Print("load ", s, "; ") },
		func(s int) { fmt.Print("find ", s, "; ") },
		func(s int) { fmt.Print("use ", s, "; ") })
	fmt.Println()
	// Output: load 0; load 1; find 0; load 2; find 1; use 0; find 2; use 1; use 2;
}
