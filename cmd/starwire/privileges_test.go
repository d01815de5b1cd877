package main

import (
	"bufio"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/netns"

	"github.com/starwire/starwire/internal/netns/netnstest"
)

// Capability bits, as capabilities(7) numbers them.
const (
	capNetAdmin = 12
	capNetRaw   = 13
	capIPCLock  = 14
	capSysAdmin = 21
	capBPF      = 39
)

// TestServeDropsCapabilities serves a task over AF_XDP in a namespace and
// reads every thread's effective set once it serves: CAP_BPF,
// CAP_NET_ADMIN and CAP_SYS_ADMIN are gone, CAP_NET_RAW and CAP_IPC_LOCK
// stay. The task still answers its health check, and its XDP counters
// still reach the metrics.
func TestServeDropsCapabilities(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	pair := netnstest.NewForTest(t, netns.Options{})
	self := netip.AddrPortFrom(pair.B.Addr, 2222).String()
	peer := netip.AddrPortFrom(pair.A.Addr, 2222).String()
	em := filepath.Join(t.TempDir(), "endpoint_map")
	err := os.WriteFile(em, []byte(self+"="+netip.AddrPortFrom(pair.B.Addr, 7788).String()+"\n"+
		peer+"="+netip.AddrPortFrom(pair.A.Addr, 7788).String()+"\n"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	p := startIn(t, pair.B.NS, "serve", "--job", "ps", "--task", "0", "--cluster", "ps="+self+";worker="+peer,
		"--endpoint_map", em, "--afxdp_iface", pair.B.Link, "--report", "0", "--metrics_addr", "127.0.0.1:0")
	url := p.waitLine(t, regexp.MustCompile(`^metrics at http://`), 20*time.Second)
	p.waitLine(t, regexp.MustCompile(`dropped \d+ capabilities \(CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_BPF among them\); kept CAP_NET_RAW, CAP_IPC_LOCK`), 20*time.Second)
	line := p.waitLine(t, regexp.MustCompile(`serving: `), 20*time.Second)
	if !strings.Contains(line, "AF_XDP on "+pair.B.Link) {
		t.Fatalf("the task does not serve over AF_XDP: %s", line)
	}
	threads := 0
	for tid, eff := range effectiveSets(t, p.cmd.Process.Pid) {
		threads++
		for _, c := range []struct {
			bit  uint
			want bool
			name string
		}{{capBPF, false, "CAP_BPF"}, {capNetAdmin, false, "CAP_NET_ADMIN"}, {capSysAdmin, false, "CAP_SYS_ADMIN"},
			{capNetRaw, true, "CAP_NET_RAW"}, {capIPCLock, true, "CAP_IPC_LOCK"}} {
			if has := eff&(1<<c.bit) != 0; has != c.want {
				t.Errorf("thread %d: %s in the effective set %v, want %v (CapEff %x)", tid, c.name, has, c.want, eff)
			}
		}
	}
	if threads == 0 {
		t.Fatal("read no thread's capabilities")
	}
	out, err := exec.Command("ip", "netns", "exec", pair.B.NS, buildBinary(t), "health", "--addr", self).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SERVING") {
		t.Errorf("health check after the drop: %v: %s", err, out)
	}
	url = strings.Fields(url)[2]
	metrics, err := exec.Command("ip", "netns", "exec", pair.B.NS, "curl", "-sf", url).Output()
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	if !regexp.MustCompile(`(?m)^starwire_xdp_up\{[^}]*\} 1$`).Match(metrics) {
		t.Errorf("the XDP counters are not readable after the drop:\n%s", grepLines(string(metrics), "starwire_xdp"))
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("serve exited %d on SIGTERM:\n%s", code, p.stderr.String())
	}
}

// startIn starts the built command in network namespace ns.
func startIn(t *testing.T, ns string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command("ip", append([]string{"netns", "exec", ns, buildBinary(t)}, args...)...), lines: make(chan string, 1024)}
	p.cmd.Env = append(os.Environ(), "TF_CONFIG=")
	p.cmd.Stderr = &p.stderr
	r, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(io.TeeReader(r, &p.out))
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	return p
}

// effectiveSets reads the effective capability set of each thread of pid.
func effectiveSets(t *testing.T, pid int) map[int]uint64 {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]uint64{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "status"))
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
				eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				if err != nil {
					t.Fatalf("%s: %q: %v", e.Name(), line, err)
				}
				tid, _ := strconv.Atoi(e.Name())
				out[tid] = eff
			}
		}
	}
	return out
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
