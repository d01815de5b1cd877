package netns_test

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// udpExchange sends n datagrams from a to b and returns how many arrived
// within the deadline.
func udpExchange(t *testing.T, p *netns.Pair, n int) int {
	t.Helper()
	var srv, cli *net.UDPConn
	if err := p.B.Do(func() (err error) {
		srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.B.Addr, 0)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := p.A.Do(func() (err error) {
		cli, err = net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i := range n {
		if _, err := cli.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	buf := make([]byte, 64)
	for got < n {
		srv.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, _, err := srv.ReadFromUDP(buf); err != nil {
			break
		}
		got++
	}
	return got
}

func TestPairCarriesUDP(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{MTU: 9000})
	if !p.A.Prefix.Contains(p.A.Addr) || !p.A.Prefix.Contains(p.B.Addr) || p.A.Addr == p.B.Addr {
		t.Fatalf("addresses %v %v in %v", p.A.Addr, p.B.Addr, p.A.Prefix)
	}
	if !netip.MustParsePrefix("198.18.0.0/15").Contains(p.A.Addr) {
		t.Fatalf("address %v outside 198.18.0.0/15", p.A.Addr)
	}
	if got := udpExchange(t, p, 20); got != 20 {
		t.Fatalf("%d of 20 datagrams arrived", got)
	}
	// The links carry the requested queue count and MTU.
	err := p.A.Do(func() error {
		l, err := netlink.LinkByName(p.A.Link)
		if err != nil {
			return err
		}
		if a := l.Attrs(); a.NumRxQueues != 1 || a.NumTxQueues != 1 || a.MTU != 9000 || a.Index != p.A.Ifindex {
			t.Errorf("link attrs: rx %d tx %d mtu %d index %d", a.NumRxQueues, a.NumTxQueues, a.MTU, a.Index)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestQueues(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{Queues: 2})
	err := p.B.Do(func() error {
		l, err := netlink.LinkByName(p.B.Link)
		if err != nil {
			return err
		}
		if l.Attrs().NumRxQueues != 2 {
			t.Errorf("peer has %d rx queues, want 2", l.Attrs().NumRxQueues)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDoRestoresNamespace(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	before, err := vnetns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	want := errors.New("marker")
	var inside vnetns.NsHandle
	err = p.A.Do(func() error {
		inside, _ = vnetns.Get()
		return want
	})
	if !errors.Is(err, want) {
		t.Fatalf("Do returned %v", err)
	}
	defer inside.Close()
	if inside.Equal(before) {
		t.Fatal("Do ran f in the original namespace")
	}
	// Every thread of the process that ran Do went back: the namespace of a
	// fresh lookup from this goroutine is still the original.
	now, _ := vnetns.Get()
	defer now.Close()
	if !now.Equal(before) {
		t.Fatal("namespace changed after Do")
	}
}

func TestGoStaysInNamespace(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	res := make(chan string, 1)
	if err := p.B.Go(func() {
		time.Sleep(10 * time.Millisecond) // paces a park: the goroutine may resume on another thread, which must be in the namespace too
		l, err := netlink.LinkByIndex(p.B.Ifindex)
		if err != nil {
			res <- err.Error()
			return
		}
		res <- l.Attrs().Name
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-res:
		if name != p.B.Link {
			t.Fatalf("goroutine saw %q, want %q", name, p.B.Link)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("goroutine did not report")
	}
}

func TestNetemLoss(t *testing.T) {
	netnstest.Require(t, netnstest.Netem)
	p := netnstest.NewForTest(t, netns.Options{})
	if err := p.A.Netem("loss", "100%"); err != nil {
		t.Fatal(err)
	}
	if got := udpExchange(t, p, 5); got != 0 {
		t.Fatalf("%d datagrams crossed a 100%% loss link", got)
	}
	if err := p.A.ClearNetem(); err != nil {
		t.Fatal(err)
	}
	if got := udpExchange(t, p, 5); got != 5 {
		t.Fatalf("%d of 5 datagrams after clearing netem", got)
	}
}

func TestNetemReportsMissingQdisc(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	err := p.A.Netem("duplicate", "1%")
	probeErr := netns.ProbeNetem()
	if (err == nil) != (probeErr == nil) {
		t.Fatalf("Netem: %v, probe: %v", err, probeErr)
	}
	if err != nil && !errors.Is(err, netns.ErrNetemUnsupported) {
		t.Fatalf("Netem on a kernel without it: %v", err)
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	netnstest.Require(t)
	p, err := netns.New(netns.Options{})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{p.A.NS, p.B.NS}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join("/run/netns", n)); !os.IsNotExist(err) {
			t.Fatalf("namespace %s still exists: %v", n, err)
		}
	}
	if _, err := netlink.LinkByName(p.A.Link); err == nil {
		t.Fatalf("link %s visible in the original namespace", p.A.Link)
	}
}

func TestSweepStale(t *testing.T) {
	netnstest.Require(t)
	// A pid that cannot exist (above pid_max's ceiling).
	name := "sw-4194305-1-a"
	h, err := netns.NewNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	t.Cleanup(func() { vnetns.DeleteNamed(name) })
	if _, err := netns.SweepStale(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join("/run/netns", name)); !os.IsNotExist(err) {
		t.Fatalf("stale namespace %s survived: %v", name, err)
	}
}
