package netns

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var (
	probeOnce sync.Once
	probeErr  error
	netemOnce sync.Once
	netemErr  error
)

// Probe reports why this machine cannot create network namespaces, veth
// pairs and AF_XDP sockets (CAP_NET_ADMIN and kernel support), or nil
// when it can. It tries once per process and remembers the answer.
func Probe() error {
	probeOnce.Do(func() { probeErr = probe() })
	return probeErr
}

// ProbeNetem reports why this machine cannot install the netem qdisc
// (Probe's answer, or ErrNetemUnsupported where the kernel lacks it), or
// nil when it can. It tries once per process and remembers the answer.
func ProbeNetem() error {
	netemOnce.Do(func() {
		if netemErr = Probe(); netemErr == nil {
			netemErr = probeNetem()
		}
	})
	return netemErr
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

// probe tries what a Pair needs in a throw-away namespace owned by a
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
