package netnstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRequireGate re-runs this test binary without CAP_NET_ADMIN (through
// setpriv) and checks that Require skips, or fails under
// STARWIRE_REQUIRE_AFXDP=1.
func TestRequireGate(t *testing.T) {
	if os.Getenv("NETNS_GATE_CHILD") == "1" {
		Require(t)
		t.Log("capabilities present")
		return
	}
	Require(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatal("setpriv (util-linux) is needed to test the gate")
		}
		t.Skip("setpriv not installed")
	}
	run := func(require string) (string, error) {
		cmd := exec.Command(setpriv, "--inh-caps=-all", "--bounding-set=-net_admin,-sys_admin", "--",
			os.Args[0], "-test.run=^TestRequireGate$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "NETNS_GATE_CHILD=1", RequireEnv+"="+require)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("0")
	if err != nil || !strings.Contains(out, "--- SKIP") {
		t.Fatalf("without capabilities and %s=0: want a skip, got %v:\n%s", RequireEnv, err, out)
	}
	out, err = run("1")
	if err == nil || !strings.Contains(out, "--- FAIL") {
		t.Fatalf("without capabilities and %s=1: want a failure, got %v:\n%s", RequireEnv, err, out)
	}
}
