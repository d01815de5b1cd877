package main

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestSpareProc(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   string // "" leaves GOMAXPROCS unset
		delta int
		say   string
	}{
		{name: "unset", delta: 1, say: "one spare"},
		{name: "set by the user", env: "2", delta: 0, say: "as the environment sets it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, had := os.LookupEnv("GOMAXPROCS")
			t.Cleanup(func() {
				if had {
					os.Setenv("GOMAXPROCS", old)
				} else {
					os.Unsetenv("GOMAXPROCS")
				}
			})
			if tc.env == "" {
				os.Unsetenv("GOMAXPROCS")
			} else {
				os.Setenv("GOMAXPROCS", tc.env)
			}
			before := runtime.GOMAXPROCS(0)
			p, restore := addSpareProc()
			if got := runtime.GOMAXPROCS(0); got != before+tc.delta || p.After != got || p.Before != before {
				t.Errorf("GOMAXPROCS %d → %d, reported %d → %d; want %d → %d", before, got, p.Before, p.After, before, before+tc.delta)
			}
			if !strings.Contains(p.String(), tc.say) {
				t.Errorf("String() = %q, want it to say %q", p, tc.say)
			}
			restore()
			if got := runtime.GOMAXPROCS(0); got != before {
				t.Errorf("after restore GOMAXPROCS %d, want %d", got, before)
			}
		})
	}
}
