package envvar

import "testing"

func TestBool(t *testing.T) {
	tests := []struct {
		value     string
		def, want bool
	}{
		{"", true, true}, {"", false, false}, {"true", false, true}, {"False", true, false},
		{" 1 ", false, true}, {"0", true, false}, {"maybe", true, true},
	}
	for _, tt := range tests {
		t.Setenv("STARWIRE_TEST_BOOL", tt.value)
		if got := Bool("STARWIRE_TEST_BOOL", tt.def); got != tt.want {
			t.Errorf("Bool(%q, %v) = %v", tt.value, tt.def, got)
		}
	}
}

func TestBoolSet(t *testing.T) {
	tests := []struct {
		value string
		v, ok bool
	}{
		{"", false, false}, {"maybe", false, false}, {"True", true, true}, {"false", false, true}, {"0", false, true},
	}
	for _, tt := range tests {
		t.Setenv("STARWIRE_TEST_BOOL", tt.value)
		if v, ok := BoolSet("STARWIRE_TEST_BOOL"); v != tt.v || ok != tt.ok {
			t.Errorf("BoolSet(%q) = %v, %v; want %v, %v", tt.value, v, ok, tt.v, tt.ok)
		}
	}
}

func TestPositiveInt(t *testing.T) {
	tests := []struct {
		value string
		n     int
		ok    bool
	}{
		{"", 0, false}, {"4", 4, true}, {" 16 ", 16, true}, {"0", 0, false}, {"-2", 0, false}, {"x", 0, false},
	}
	for _, tt := range tests {
		t.Setenv("STARWIRE_TEST_INT", tt.value)
		if n, ok := PositiveInt("STARWIRE_TEST_INT"); n != tt.n || ok != tt.ok {
			t.Errorf("PositiveInt(%q) = %d, %v", tt.value, n, ok)
		}
	}
}
