package netns

import "testing"

func TestOwnerPid(t *testing.T) {
	tests := []struct {
		name string
		pid  int
		ok   bool
	}{
		{"sw-123-4-a", 123, true},
		{"sw-123-4-b", 123, true},
		{"sw-123-4-c", 0, false},
		{"sw-x-4-a", 0, false},
		{"other-123-4-a", 0, false},
		{"sw-123-a", 0, false},
	}
	for _, tt := range tests {
		pid, ok := ownerPid(tt.name)
		if ok != tt.ok || (ok && pid != tt.pid) {
			t.Errorf("%s: %d %v", tt.name, pid, ok)
		}
	}
}
