package envvar

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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

// TestCheck: a bad value is refused in one line naming the variable, the
// value and what is accepted; good and unset values pass.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
	}{
		{CoreNumber, "abc", `SEASTAR_CORE_NUMBER="abc": want a whole number from 1 to 1024`},
		{CoreNumber, "0", `SEASTAR_CORE_NUMBER="0": want a whole number`},
		{CoreNumber, "-3", `SEASTAR_CORE_NUMBER="-3": want`},
		{CoreNumber, "100000", `SEASTAR_CORE_NUMBER="100000": want a whole number from 1 to 1024`},
		{PSCoreNumber, "2.5", `NETWORK_PS_CORE_NUMBER="2.5": want`},
		{WorkerPolling, "maybe", `WORKER_ENABLE_POLLING="maybe": want true or false`},
		{PSDisablePin, "yes", `PS_DISABLE_PIN_CORES="yes": want true or false`},
		{CoreNumber, " 8 ", ""},
		{CoreNumber, "1024", ""},
		{WorkerPolling, "False", ""},
		{PSPolling, "TRUE", ""},
		{WorkerDisablePin, "0", ""},
		{CoreNumber, "", ""},
	} {
		t.Setenv(tc.name, tc.value)
		err := Check(CoreNumber, PSCoreNumber, WorkerPolling, PSDisablePin, WorkerDisablePin, PSPolling)
		os.Unsetenv(tc.name)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s=%q refused: %v", tc.name, tc.value, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s=%q: %v, want %q", tc.name, tc.value, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "\n"):
			t.Errorf("%s=%q: error of several lines: %q", tc.name, tc.value, err)
		}
	}
}

// TestCheckAgreesWithReaders: every value Check accepts is one the readers
// use, and every value it refuses is one they would ignore, so a command
// that checked its variables runs with what they say.
func TestCheckAgreesWithReaders(t *testing.T) {
	for _, v := range []string{"1", "4", "1024", "0", "-1", "1025", "x", "true", "False", "1", "0", "maybe", "t"} {
		t.Setenv(CoreNumber, v)
		_, ok := Count(CoreNumber)
		if accepted := Check(CoreNumber) == nil; accepted != ok {
			t.Errorf("SEASTAR_CORE_NUMBER=%q: Check accepts %v, Count reads %v", v, accepted, ok)
		}
		t.Setenv(WorkerPolling, v)
		_, ok = BoolSet(WorkerPolling)
		if accepted := Check(WorkerPolling) == nil; accepted != ok {
			t.Errorf("WORKER_ENABLE_POLLING=%q: Check accepts %v, BoolSet reads %v", v, accepted, ok)
		}
	}
}

func TestVarsDescribed(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Vars {
		if v.Name == "" || v.Default == "" || v.Accepts == "" || v.Doc == "" {
			t.Errorf("%+v lacks a field", v)
		}
		if seen[v.Name] {
			t.Errorf("%s listed twice", v.Name)
		}
		seen[v.Name] = true
	}
	for _, name := range []string{CoreNumber, PSCoreNumber, WorkerCoreNumber, WorkerPolling, PSPolling,
		WorkerDisablePin, PSDisablePin, EndpointMapPath, TFConfig, TLSDir, TLSCert, TLSKey, TLSCA} {
		if !seen[name] {
			t.Errorf("%s not in Vars", name)
		}
	}
}

func TestTLSVarsChecked(t *testing.T) {
	dir := t.TempDir()
	for _, name := range TLSDirFiles[:2] {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(TLSCert, filepath.Join(dir, "tls.crt"))
	if err := Check(TLSCert); err != nil {
		t.Errorf("an existing file refused: %v", err)
	}
	t.Setenv(TLSDir, dir)
	if err := Check(TLSDir); err == nil || !strings.Contains(err.Error(), "want a directory holding tls.crt, tls.key and ca.crt") {
		t.Errorf("a directory without ca.crt: %v", err)
	}
	t.Setenv(TLSCA, filepath.Join(dir, "ca.crt"))
	if err := Check(TLSCA); err == nil || !strings.Contains(err.Error(), TLSCA+"=") {
		t.Errorf("a missing file: %v", err)
	}
}
