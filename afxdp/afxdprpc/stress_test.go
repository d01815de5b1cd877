package afxdprpc_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/bench/stress"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// stressPort is the UDP port of the stress test's packet transport.
const stressPort = 7720

// The test binary doubles as the stress server, started by
// TestStressBulkAFXDP inside a namespace with the spec "LINK:PORT".
func init() { stress.Child{Listen: listenAFXDP}.Main() }

// listenAFXDP opens the packet transport on AF_XDP sockets of the link
// named in spec, in this process's namespace, and listens on it.
func listenAFXDP(spec string) (rpc.Listener, error) {
	if addr, ok := strings.CutPrefix(spec, "tcp:"); ok {
		return (&tcp.Transport{}).Listen(addr) // the equal-load test's TCP server
	}
	ifname, p, _ := strings.Cut(spec, ":")
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("stress spec %q: %w", spec, err)
	}
	g, err := openXDP(ifname, uint16(port))
	if err != nil {
		return nil, err
	}
	return afxdprpc.Transport(g).Listen("")
}

// TestStressBulkAFXDP runs the two-way bulk load (stress.Bulk: 40 callers on
// one connection, 4–16 MiB echoes, for 8s) over AF_XDP between two network
// namespaces, the server in a process of its own: every call must be
// answered correctly or fail with DeadlineExceeded, none may return more
// than 100ms after its deadline, and none may hang. The window proves what
// a longer one would for the reasons bench/stress's TestStressBulkTCP
// gives: what is checked holds per call, and 8s holds hundreds of calls,
// each caller's many.
func TestStressBulkAFXDP(t *testing.T) {
	if raceOn {
		t.Skip("stress tests run in the pass without the race detector")
	}
	pair := netnstest.NewForTest(t, netns.Options{})
	cmd, err := stress.CommandIn(pair.B.NS, fmt.Sprintf("%s:%d", pair.B.Link, stressPort))
	if err != nil {
		t.Fatal(err)
	}
	p := startProc(t, cmd)
	g := openXDPIn(t, pair.A, stressPort)
	c := rpc.NewClient(p.Addr, rpc.ClientOptions{Transport: afxdprpc.Transport(g)})
	defer c.Close()

	w := stress.Bulk("afxdp bulk 40×4–16MiB", 8*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), w.Duration+w.Deadline+3*time.Second)
	defer cancel()
	r := w.Run(ctx, c)
	stress.FormatReports(os.Stderr, r)
	st := g.Stats()
	fmt.Fprintf(os.Stderr, "client packets: %+v\n", st)
	if r.Hung > 0 {
		stress.DumpAll(os.Stderr, p, t.Name())
		c.Close()
	}
	for _, problem := range r.Problems(w, 100*time.Millisecond, wire.DeadlineExceeded) {
		t.Error(problem)
	}
}

// equalCalls is how many calls each of the equal-load test's 40 callers
// makes: 80 echoes of 4–16 MiB, about 0.8 GiB each way. A server's peak
// is set by the 40 calls it holds at once, which the first round of calls
// already reaches; more rounds cost the stress pass CPU seconds each and
// move no peak.
const equalCalls = 2

// TestStressBulkEqualLoad puts the same work on the packet path (AF_XDP,
// between two namespaces) and on TCP (loopback) in one run: 40 callers
// making equalCalls echoes of 4–16 MiB each, the same sizes and bytes on
// both (one seed, no short deadlines), each server a process of its own.
// It reports both servers' peak resident memory (VmHWM) and their ratio,
// the figure issue 28 bounds at 1.2 (the test logs it); the test
// fails only past maxEqualRatio, a regression no noise explains.
func TestStressBulkEqualLoad(t *testing.T) {
	if raceOn {
		t.Skip("stress tests run in the pass without the race detector")
	}
	pair := netnstest.NewForTest(t, netns.Options{})
	xcmd, err := stress.CommandIn(pair.B.NS, fmt.Sprintf("%s:%d", pair.B.Link, stressPort))
	if err != nil {
		t.Fatal(err)
	}
	tcmd, err := stress.Command("tcp:127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	xp, tp := startProc(t, xcmd), startProc(t, tcmd)
	g := openXDPIn(t, pair.A, stressPort)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	run := func(name string, p *stress.Proc, tr rpc.Transport) (hwm int64) {
		c := rpc.NewClient(p.Addr, rpc.ClientOptions{Transport: tr})
		defer c.Close()
		w := stress.BulkCalls(name, equalCalls, seed)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		r := w.Run(ctx, c)
		stress.FormatReports(os.Stderr, r)
		if r.Hung > 0 {
			stress.DumpAll(os.Stderr, p, name)
			c.Close()
		}
		for _, problem := range r.Problems(w, 100*time.Millisecond) {
			t.Errorf("%s: %s", name, problem)
		}
		if r.OK != int64(w.Callers*w.Calls) {
			t.Errorf("%s: %d of %d calls answered", name, r.OK, w.Callers*w.Calls)
		}
		m, err := p.Mem()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d calls in %v, server peak %s", name, r.OK, r.Elapsed.Round(time.Millisecond), stress.MiB(m.HWM))
		return m.HWM
	}
	th := run("tcp equal load", tp, &tcp.Transport{})
	xh := run("afxdp equal load", xp, afxdprpc.Transport(g))
	ratio := float64(xh) / float64(th)
	t.Logf("server peak memory at equal load: AF_XDP %s, TCP %s: %.2f×", stress.MiB(xh), stress.MiB(th), ratio)
	if ratio > maxEqualRatio {
		t.Errorf("AF_XDP server peaked at %.2f× the TCP server's memory for the same work, over %v×", ratio, maxEqualRatio)
	}
}

// maxEqualRatio bounds the equal-load test's memory ratio well above the
// 1.2 the packet path is held to, so that a loaded machine cannot fail it
// but a per-session or per-endpoint buffer that grew can.
const maxEqualRatio = 2.5

// startProc starts a stress server process, closed when t ends.
func startProc(t *testing.T, cmd *exec.Cmd) *stress.Proc {
	t.Helper()
	p, err := stress.Start(cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !p.Exited() {
			if err := p.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	return p
}
