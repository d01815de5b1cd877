package afxdp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
)

// The test binary doubles as a peer process that a test can kill: with
// helperEnv set it serves AF_XDP on the interface named by helperLinkEnv
// instead of running tests.
const (
	helperEnv     = "AFXDP_TEST_HELPER"
	helperLinkEnv = "AFXDP_TEST_LINK"
	helperKindEnv = "AFXDP_TEST_KIND"
	helperAddrEnv = "AFXDP_TEST_ADDR"
	helperLife    = 10 * time.Minute // a bound in case the parent's pipe stays open
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "xsk-server":
		os.Exit(runHelperServer(os.Getenv(helperLinkEnv)))
	case "rpc-server":
		os.Exit(runBenchServer(os.Getenv(helperKindEnv), os.Getenv(helperLinkEnv), os.Getenv(helperAddrEnv)))
	}
	// Every test stops what it started: endpoints, their reactors and
	// Receive loops, rpc clients and servers, helper processes. testwait
	// knows rpc's shared TCP write reactors, which live as long as the
	// process.
	testwait.VerifyTestMain(m)
}

// runBenchServer serves the benchmark's methods until its parent is done.
func runBenchServer(name, link, addr string) int {
	kind, _, xo := benchKind(name)
	a, err := netip.ParseAddr(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop, _, err := startBenchServer(kind, link, a, xo)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	fmt.Println("ready")
	waitForParent()
	return 0
}

// startHelper runs this test binary as a helper of role in e's namespace,
// waits for it to be ready, and stops it at the end of the test. It
// returns the helper's command, for a test that kills it.
func startHelper(t testing.TB, e *netns.End, role, kind string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", e.NS, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+role, helperLinkEnv+"="+e.Link,
		helperKindEnv+"="+kind, helperAddrEnv+"="+e.Addr.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // a clean exit, which detaches its XDP program
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- strings.TrimSpace(line)
	}()
	select {
	case line := <-ready:
		if line != "ready" {
			t.Fatalf("helper said %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("helper did not start")
	}
	return cmd
}

// runHelperServer accepts sessions and drops what they carry, until killed
// or its parent is done.
func runHelperServer(ifname string) int {
	l, err := link.OpenXSK(ifname, link.XSKOptions{Port: xskPort})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ep := afxdp.NewEndpoint(l, afxdp.Options{Ticket: testTicket})
	fmt.Println("ready")
	go func() {
		for {
			c, err := ep.Accept()
			if err != nil {
				return
			}
			go c.Receive(discard{})
		}
	}()
	waitForParent()
	ep.Close()
	return 0
}

// waitForParent returns when standard input closes (the parent is done or
// died) or helperLife passes.
func waitForParent() {
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-time.After(helperLife):
	}
}

type discard struct{}

func (discard) Alloc(in *wire.Inbound) error { in.AllocPooled(); return nil }
func (discard) Deliver(in *wire.Inbound)     { in.Release() }

// TestXSKPeerKilled kills the receiving process in the middle of a large
// transfer: the sender's message must complete with ErrPeerUnreachable
// within the dead-peer bound, and the dead process's XDP program must be
// gone from its interface.
func TestXSKPeerKilled(t *testing.T) {
	p := netns.NewForTest(t, netns.Options{})
	cmd := startHelper(t, p.B, "xsk-server", "")

	const deadAfter = 500 * time.Millisecond
	opts := afxdp.Options{Ticket: testTicket, DeadAfter: deadAfter, MaxRTO: 100 * time.Millisecond, Backlog: -1}
	cli := afxdp.NewEndpoint(openXSK(t, p.A, link.XSKOptions{}), opts)
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := cli.Dial(ctx, fmt.Sprintf("%s:%d", p.B.Addr, xskPort))
	if err != nil {
		t.Fatal(err)
	}
	size := 128 << 20 // within the default SessionMemory
	data := pattern(size, 2)
	done := make(doneChan, 1)
	if err := c.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1},
		Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(size)}, Data: data}}, Done: done}); err != nil {
		t.Fatal(err)
	}
	// Kill the peer once the transfer is under way: a few thousand
	// packets of its 90 thousand sent.
	var ended error
	testwait.Eventually(t, 10*time.Second, func() bool {
		select {
		case ended = <-done:
			t.Fatalf("the transfer ended before the peer was killed: %v", ended)
		default:
		}
		return cli.Stats().Sent >= 4096
	}, "the transfer to start: %+v", cli.Stats())
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	bound := deadAfter + opts.MaxRTO + time.Second
	select {
	case err := <-done:
		if !errors.Is(err, afxdp.ErrPeerUnreachable) {
			t.Fatalf("message completed with %v", err)
		}
		t.Logf("completed %v after the kill: %v", time.Since(killed), err)
	case <-time.After(bound):
		t.Fatalf("message not completed %v after the kill", bound)
	}
	cmd.Wait()
	// The program was attached through a bpf_link, which dies with the process.
	testwait.Eventually(t, 10*time.Second, func() bool {
		on, err := p.B.XDPAttached()
		if err != nil {
			t.Fatal(err)
		}
		return !on
	}, "the killed process's XDP program to be detached")
}
