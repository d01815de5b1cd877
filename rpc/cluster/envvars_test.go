package cluster

import (
	"github.com/starwire/starwire/netpath"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPacketPolling: a task's polling and pinning come from its job's
// variables, which take TensorFlow's booleans; unset or unparsable
// variables leave the defaults (adaptive polling, no pinning).
func TestPacketPolling(t *testing.T) {
	for _, tt := range []struct {
		job, poll, pin    string
		busy, set, pinned bool
	}{
		{"worker", "", "", false, false, false},
		{"worker", "true", "false", true, true, true},
		{"worker", " 1 ", "0", true, true, true},
		{"worker", "False", "true", false, true, false},
		{"worker", "maybe", "maybe", false, false, false},
		{"ps", "TRUE", "FALSE", true, true, true},
		{"chief", "0", "", false, true, false},
	} {
		pollVar, pinVar := EnvWorkerPolling, EnvWorkerDisablePin
		otherPoll, otherPin := EnvPSPolling, EnvPSDisablePin
		if tt.job == "ps" {
			pollVar, pinVar, otherPoll, otherPin = otherPoll, otherPin, pollVar, pinVar
		}
		t.Setenv(pollVar, tt.poll)
		t.Setenv(pinVar, tt.pin)
		t.Setenv(otherPoll, "true") // the other job's variables do not count
		t.Setenv(otherPin, "false")
		busy, set := PacketPolling(tt.job)
		if busy != tt.busy || set != tt.set {
			t.Errorf("%s %s=%q: PacketPolling = %v, %v; want %v, %v", tt.job, pollVar, tt.poll, busy, set, tt.busy, tt.set)
		}
		if got := PinPacketReactors(tt.job); got != tt.pinned {
			t.Errorf("%s %s=%q: PinPacketReactors = %v", tt.job, pinVar, tt.pin, got)
		}
	}
}

// TestPacketReactors: SEASTAR_CORE_NUMBER sets the AF_XDP reactors when it
// is a count; otherwise afxdp keeps its own default (0).
func TestPacketReactors(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  int
	}{{"", 0}, {"2", 2}, {" 8 ", 8}, {"0", 0}, {"-2", 0}, {"x", 0}, {"5000", 0}} {
		t.Setenv(EnvCoreNumber, tt.value)
		if got := PacketReactors(); got != tt.want {
			t.Errorf("SEASTAR_CORE_NUMBER=%q: PacketReactors() = %d, want %d", tt.value, got, tt.want)
		}
	}
}

// TestOtherVariables: the variables the command reads through this
// package come back as set, with their defaults when unset.
func TestOtherVariables(t *testing.T) {
	t.Setenv(EnvAFXDPPath, "")
	if got := AFXDPPath(); got != "auto" {
		t.Errorf("unset STARWIRE_AFXDP_PATH: %q", got)
	}
	t.Setenv(EnvAFXDPPath, " 64KiB ")
	if got := AFXDPPath(); got != "64KiB" {
		t.Errorf("STARWIRE_AFXDP_PATH=64KiB: %q", got)
	}
	t.Setenv(EnvTLSDir, "/d")
	t.Setenv(EnvTLSCert, "/c")
	t.Setenv(EnvTLSKey, "")
	t.Setenv(EnvTLSCA, "/a")
	if dir, files := TLSFiles(); dir != "/d" || files != [3]string{"/c", "", "/a"} {
		t.Errorf("TLSFiles() = %q, %q", dir, files)
	}
	t.Setenv(EnvPacketTicketFile, "/t")
	if got := PacketTicketFile(); got != "/t" {
		t.Errorf("PacketTicketFile() = %q", got)
	}
}

// TestCheckEnv: a bad value is refused in one line naming the variable, the
// value and what is accepted; good and unset values pass.
func TestCheckEnv(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
	}{
		{EnvCoreNumber, "abc", `SEASTAR_CORE_NUMBER="abc": want a whole number from 1 to 1024`},
		{EnvCoreNumber, "0", `SEASTAR_CORE_NUMBER="0": want a whole number`},
		{EnvCoreNumber, "-3", `SEASTAR_CORE_NUMBER="-3": want`},
		{EnvCoreNumber, "100000", `SEASTAR_CORE_NUMBER="100000": want a whole number from 1 to 1024`},
		{EnvPSCoreNumber, "2.5", `NETWORK_PS_CORE_NUMBER="2.5": want`},
		{EnvWorkerPolling, "maybe", `WORKER_ENABLE_POLLING="maybe": want true or false`},
		{EnvPSDisablePin, "yes", `PS_DISABLE_PIN_CORES="yes": want true or false`},
		{EnvCoreNumber, " 8 ", ""},
		{EnvCoreNumber, "1024", ""},
		{EnvWorkerPolling, "False", ""},
		{EnvPSPolling, "TRUE", ""},
		{EnvWorkerDisablePin, "0", ""},
		{EnvCoreNumber, "", ""},
	} {
		t.Setenv(tc.name, tc.value)
		err := CheckEnv(EnvCoreNumber, EnvPSCoreNumber, EnvWorkerPolling, EnvPSDisablePin, EnvWorkerDisablePin, EnvPSPolling)
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

// TestCheckAgreesWithReaders: every value CheckEnv accepts is one the readers
// use, and every value it refuses is one they would ignore, so a command
// that checked its variables runs with what they say.
func TestCheckAgreesWithReaders(t *testing.T) {
	for _, v := range []string{"1", "4", "1024", "0", "-1", "1025", "x", "true", "False", "1", "0", "maybe", "t"} {
		t.Setenv(EnvCoreNumber, v)
		_, ok := envCount(EnvCoreNumber)
		if accepted := CheckEnv(EnvCoreNumber) == nil; accepted != ok {
			t.Errorf("SEASTAR_CORE_NUMBER=%q: Check accepts %v, envCount reads %v", v, accepted, ok)
		}
		t.Setenv(EnvWorkerPolling, v)
		_, ok = envBool(EnvWorkerPolling)
		if accepted := CheckEnv(EnvWorkerPolling) == nil; accepted != ok {
			t.Errorf("WORKER_ENABLE_POLLING=%q: Check accepts %v, envBool reads %v", v, accepted, ok)
		}
	}
}

func TestVarsDescribed(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range EnvVars {
		if v.Name == "" || v.Default == "" || v.Accepts == "" || v.Doc == "" {
			t.Errorf("%+v lacks a field", v)
		}
		if seen[v.Name] {
			t.Errorf("%s listed twice", v.Name)
		}
		seen[v.Name] = true
	}
	for _, name := range []string{EnvCoreNumber, EnvPSCoreNumber, EnvWorkerCoreNumber, EnvWorkerPolling, EnvPSPolling,
		EnvWorkerDisablePin, EnvPSDisablePin, EnvEndpointMapPath, EnvTFConfig, EnvTLSDir, EnvTLSCert, EnvTLSKey, EnvTLSCA} {
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
	t.Setenv(EnvTLSCert, filepath.Join(dir, "tls.crt"))
	if err := CheckEnv(EnvTLSCert); err != nil {
		t.Errorf("an existing file refused: %v", err)
	}
	t.Setenv(EnvTLSDir, dir)
	if err := CheckEnv(EnvTLSDir); err == nil || !strings.Contains(err.Error(), "want a directory holding tls.crt, tls.key and ca.crt") {
		t.Errorf("a directory without ca.crt: %v", err)
	}
	t.Setenv(EnvTLSCA, filepath.Join(dir, "ca.crt"))
	if err := CheckEnv(EnvTLSCA); err == nil || !strings.Contains(err.Error(), EnvTLSCA+"=") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestPathPolicyEnvCheck: the command's check of STARWIRE_AFXDP_PATH
// accepts exactly what netpath.ParsePolicy reads.
func TestPathPolicyEnvCheck(t *testing.T) {
	v, ok := LookupEnvVar(EnvAFXDPPath)
	if !ok {
		t.Fatalf("%s not described", EnvAFXDPPath)
	}
	for _, s := range []string{"auto", "AUTO", "afxdp", "bypass", "always", "tcp", "never", "64KiB", "1MiB", "4096", "0", "-1", "fast",
		"4 KiB", "1.5MiB", "2G", "8589934592GiB", "99999999999GiB"} {
		_, err := netpath.ParsePolicy(s)
		if accepted := v.Check(s) == nil; accepted != (err == nil) {
			t.Errorf("%s=%q: the check accepts %v, ParsePolicy: %v", EnvAFXDPPath, s, accepted, err)
		}
	}
}
