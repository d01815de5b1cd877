package afxdprpc_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/bench/stress"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/rpc"
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
	pair := netns.NewForTest(t, netns.Options{})
	cmd, err := stress.CommandIn(pair.B.NS, fmt.Sprintf("%s:%d", pair.B.Link, stressPort))
	if err != nil {
		t.Fatal(err)
	}
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
