package rpc

import "testing"

func TestPlaintextAnswer(t *testing.T) {
	for _, tt := range []struct{ hint, want string }{
		{"", PlaintextRefusal},
		{"  ", PlaintextRefusal},
		{"--tls_dir", PlaintextRefusal + " (--tls_dir)"},
	} {
		if got := PlaintextAnswer(tt.hint); got != tt.want {
			t.Errorf("PlaintextAnswer(%q) = %q, want %q", tt.hint, got, tt.want)
		}
	}
}
