package capabilities

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"kernel.org/pub/linux/libs/security/libcap/cap"
)

const childEnv = "STARWIRE_CAPABILITIES_CHILD"

// TestDrop drops all but CAP_NET_RAW in a child process (it cannot be
// undone) and reads every thread's sets from /proc.
func TestDrop(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		dropped, err := Drop(cap.NET_RAW)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("dropped %s", strings.Join(dropped, " "))
		for _, set := range threadSets(t, "CapEff", "CapPrm", "CapBnd") {
			fmt.Println("set", set)
		}
		return
	}
	if on, _ := cap.GetProc().GetFlag(cap.Permitted, cap.NET_RAW); !on {
		if os.Getenv("STARWIRE_REQUIRE_AFXDP") == "1" {
			t.Fatal("the test needs CAP_NET_RAW (STARWIRE_REQUIRE_AFXDP=1)")
		}
		t.Skip("the process has no CAP_NET_RAW to keep")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestDrop$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := strconv.FormatUint(1<<cap.NET_RAW, 16)
	threads := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "set" {
			continue
		}
		threads++
		if got := strings.TrimLeft(f[3], "0"); got != want {
			t.Errorf("thread %s %s %s, want only CAP_NET_RAW (%s)", f[1], f[2], f[3], want)
		}
	}
	if threads < 3 {
		t.Fatalf("child reported no thread's sets:\n%s", out)
	}
	if !strings.Contains(string(out), "CAP_NET_ADMIN") || !strings.Contains(string(out), "CAP_BPF") {
		t.Errorf("child does not say it dropped CAP_NET_ADMIN and CAP_BPF:\n%s", out)
	}
}

// threadSets returns "tid Name: hex" for each named set of each thread.
func threadSets(t *testing.T, names ...string) []string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, n := range names {
				if strings.HasPrefix(line, n+":") {
					out = append(out, task.Name()+" "+strings.Join(strings.Fields(line), " "))
				}
			}
		}
	}
	return out
}
