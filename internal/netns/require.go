package netns

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RequireEnv names the variable that turns Require's skips into failures.
const RequireEnv = "STARWIRE_REQUIRE_AFXDP"

// RequireNetemEnv does the same for the Netem feature, which kernels built
// without CONFIG_NET_SCH_NETEM lack even where AF_XDP works.
const RequireNetemEnv = "STARWIRE_REQUIRE_NETEM"

// Feature is an optional capability a test asks Require for, beyond the
// namespaces, veth pairs and AF_XDP sockets every caller needs.
type Feature int

const (
	// Netem is the netem qdisc, used by End.Netem.
	Netem Feature = iota + 1
)

var (
	probeOnce sync.Once
	probeErr  error
	netemOnce sync.Once
	netemErr  error
)

// Require skips t unless this machine can create network namespaces, veth
// pairs and AF_XDP sockets (CAP_NET_ADMIN and kernel support), plus any
// features listed. When STARWIRE_REQUIRE_AFXDP=1 a missing capability
// fails t instead, so CI cannot pass by skipping; a missing Netem fails t
// only under STARWIRE_REQUIRE_NETEM=1.
func Require(t testing.TB, features ...Feature) {
	t.Helper()
	probeOnce.Do(func() { probeErr = probe() })
	if probeErr != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("kernel-bypass test needs netns, veth and AF_XDP (%s=1): %v", RequireEnv, probeErr)
		}
		t.Skipf("kernel-bypass test skipped, machine lacks netns/veth/AF_XDP: %v", probeErr)
	}
	for _, f := range features {
		if f != Netem {
			t.Fatalf("netns: unknown feature %d", f)
		}
		netemOnce.Do(func() { netemErr = probeNetem() })
		if netemErr == nil {
			continue
		}
		if os.Getenv(RequireNetemEnv) == "1" {
			t.Fatalf("test needs netem (%s=1): %v", RequireNetemEnv, netemErr)
		}
		t.Skipf("test skipped, kernel lacks netem: %v", netemErr)
	}
}

// probeNetem installs netem on a throw-away pair.
func probeNetem() error {
	p, err := New(Options{})
	if err != nil {
		return err
	}
	defer p.Close()
	return p.A.Netem("loss", "0%")
}

// NewForTest is Require, New and t.Cleanup(Close) in one call.
func NewForTest(t testing.TB, opts Options) *Pair {
	t.Helper()
	Require(t)
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// probe tries what the harness needs in a throw-away namespace owned by a
// thread that exits afterwards, taking the namespace and veth with it.
func probe() error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the probe namespace
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				return fmt.Errorf("unshare network namespace: %w", err)
			}
			v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "swprobe0", TxQLen: -1}, PeerName: "swprobe1", PeerTxQLen: -1}
			if err := netlink.LinkAdd(v); err != nil {
				return fmt.Errorf("create veth: %w", err)
			}
			fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("AF_XDP socket: %w", err)
			}
			unix.Close(fd)
			return nil
		}()
	}()
	return <-errc
}
