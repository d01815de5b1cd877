package vethnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/starwire/starwire/internal/netns"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// A Segment is test hosts on one Ethernet segment: each host a named
// network namespace (visible to "ip netns") holding one interface,
// HostLink, whose veth peer is a port of a bridge in a namespace of the
// segment's own. Nothing of it is in the caller's namespace, so deleting
// the segment's namespaces removes every interface it made.
type Segment struct {
	Name   string
	Prefix netip.Prefix
	Hosts  []Host

	handles map[string]vnetns.NsHandle // by host name
}

// A Host is one namespace of a Segment.
type Host struct {
	Name string     // as given to BuildSegment
	NS   string     // its namespace's name
	Addr netip.Addr // HostLink's address, in the segment's prefix
	MAC  net.HardwareAddr
}

// HostLink is the name of each host's interface, and BridgeName the
// bridge's, in the switch namespace.
const (
	HostLink   = "eth0"
	BridgeName = "br0"
)

// switchHost names the namespace holding the bridge; host names may not
// take it.
const switchHost = "switch"

// nsPrefix starts every segment namespace's name: "swc-<segment>-<host>".
const nsPrefix = "swc-"

// namePattern is what segment and host names may be: no '-', so that one
// segment's namespaces are never taken for another's, and short enough
// for an interface name (a host's bridge port is named after it).
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9]{0,14}$`)

// CheckName reports whether name can name a segment or a host.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("vethnet: name %q: want a lower-case letter, then up to 14 letters or digits", name)
	}
	return nil
}

// NSName is the namespace of host in segment.
func NSName(segment, host string) string { return nsPrefix + segment + "-" + host }

// BuildSegment creates the segment: a namespace with a bridge, and a
// namespace per host joined to it by a veth pair whose host end, HostLink,
// has one queue (so an AF_XDP socket on queue 0 sees all its traffic) and
// the next address of prefix. It needs CAP_NET_ADMIN and CAP_SYS_ADMIN.
// On error it deletes what it made.
func BuildSegment(name string, prefix netip.Prefix, hosts []string) (_ *Segment, err error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if !prefix.Addr().Is4() {
		return nil, fmt.Errorf("vethnet: prefix %v is not IPv4", prefix)
	}
	prefix = prefix.Masked()
	if n := 1<<(32-prefix.Bits()) - 2; len(hosts) > n {
		return nil, fmt.Errorf("vethnet: %d hosts do not fit in %v (%d addresses)", len(hosts), prefix, n)
	}
	s := &Segment{Name: name, Prefix: prefix, handles: map[string]vnetns.NsHandle{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Delete())
		}
	}()
	sw, err := s.addNamespace(switchHost)
	if err != nil {
		return nil, err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: BridgeName, TxQLen: -1}}
	if err := sw.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("vethnet: bridge in %s: %w", NSName(name, switchHost), err)
	}
	if err := sw.LinkSetUp(br); err != nil {
		return nil, fmt.Errorf("vethnet: bridge up: %w", err)
	}
	addr := prefix.Addr()
	seen := map[string]bool{switchHost: true}
	for _, hn := range hosts {
		if err := CheckName(hn); err != nil {
			return nil, err
		}
		if seen[hn] {
			return nil, fmt.Errorf("vethnet: host name %q given twice or reserved", hn)
		}
		seen[hn] = true
		addr = addr.Next()
		h, err := s.addHost(sw, br, hn, addr)
		if err != nil {
			return nil, err
		}
		s.Hosts = append(s.Hosts, h)
	}
	for _, h := range s.Hosts {
		if err := s.waitUp(h); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// addNamespace creates the named namespace of host, brings its loopback
// up and returns a netlink handle in it, which the caller closes.
func (s *Segment) addNamespace(host string) (*netlink.Handle, error) {
	ns := NSName(s.Name, host)
	h, err := netns.NewNamed(ns)
	if err != nil {
		return nil, fmt.Errorf("vethnet: namespace %s: %w", ns, err)
	}
	s.handles[host] = h
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		return nil, fmt.Errorf("vethnet: netlink in %s: %w", ns, err)
	}
	lo, err := nl.LinkByName("lo")
	if err == nil {
		err = nl.LinkSetUp(lo)
	}
	if err != nil {
		nl.Close()
		return nil, fmt.Errorf("vethnet: loopback in %s: %w", ns, err)
	}
	return nl, nil
}

// addHost makes host's namespace and joins it to the bridge.
func (s *Segment) addHost(sw *netlink.Handle, br *netlink.Bridge, name string, addr netip.Addr) (Host, error) {
	h := Host{Name: name, NS: NSName(s.Name, name), Addr: addr}
	nl, err := s.addNamespace(name)
	if err != nil {
		return h, err
	}
	defer nl.Close()
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{
			Name: HostLink, TxQLen: -1, NumTxQueues: 1, NumRxQueues: 1,
			Namespace: netlink.NsFd(s.handles[name]),
		},
		PeerName: name, PeerTxQLen: -1, PeerNumTxQueues: 1, PeerNumRxQueues: 1,
	}
	// Created from the switch's handle, the peer stays in the switch.
	if err := sw.LinkAdd(veth); err != nil {
		return h, fmt.Errorf("vethnet: veth for %s: %w", name, err)
	}
	port, err := sw.LinkByName(name)
	if err == nil {
		err = sw.LinkSetMaster(port, br)
	}
	if err == nil {
		err = sw.LinkSetUp(port)
	}
	if err != nil {
		return h, fmt.Errorf("vethnet: bridge port %s: %w", name, err)
	}
	l, err := nl.LinkByName(HostLink)
	if err == nil {
		err = nl.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(s.Prefix.Bits(), 32)}})
	}
	if err == nil {
		err = nl.LinkSetUp(l)
	}
	if err != nil {
		return h, fmt.Errorf("vethnet: %s of %s: %w", HostLink, name, err)
	}
	h.MAC = l.Attrs().HardwareAddr
	return h, nil
}

// waitUp waits for the kernel to report h's link operationally up: until
// its link watch has run, packets sent on it are dropped.
func (s *Segment) waitUp(h Host) error {
	nl, err := netlink.NewHandleAt(s.handles[h.Name])
	if err != nil {
		return fmt.Errorf("vethnet: netlink in %s: %w", h.NS, err)
	}
	defer nl.Close()
	deadline := time.Now().Add(linkUpTimeout)
	for {
		l, err := nl.LinkByName(HostLink)
		if err != nil {
			return fmt.Errorf("vethnet: %s of %s: %w", HostLink, h.Name, err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vethnet: %s of %s not up after %v", HostLink, h.Name, linkUpTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Host returns the host named name.
func (s *Segment) Host(name string) (Host, bool) {
	for _, h := range s.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return Host{}, false
}

// Do runs fn on a thread inside host's namespace: sockets fn opens and
// processes it starts belong to the namespace.
func (s *Segment) Do(host string, fn func() error) error {
	h, ok := s.handles[host]
	if !ok {
		return fmt.Errorf("vethnet: segment %s has no host %s", s.Name, host)
	}
	return netns.Do(h, fn)
}

// LinkStats returns the bytes and packets host's link has received and
// sent, as the kernel counts them.
func (s *Segment) LinkStats(host string) (netlink.LinkStatistics, error) {
	h, ok := s.handles[host]
	if !ok {
		return netlink.LinkStatistics{}, fmt.Errorf("vethnet: segment %s has no host %s", s.Name, host)
	}
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		return netlink.LinkStatistics{}, fmt.Errorf("vethnet: netlink in %s: %w", NSName(s.Name, host), err)
	}
	defer nl.Close()
	l, err := nl.LinkByName(HostLink)
	if err != nil {
		return netlink.LinkStatistics{}, fmt.Errorf("vethnet: %s of %s: %w", HostLink, host, err)
	}
	if st := l.Attrs().Statistics; st != nil {
		return netlink.LinkStatistics(*st), nil
	}
	return netlink.LinkStatistics{}, nil
}

// Delete closes the segment's handles and deletes its namespaces. A
// namespace a process still runs in lives on, with its interface, until
// that process ends; stop them first.
func (s *Segment) Delete() error {
	for _, h := range s.handles {
		h.Close()
	}
	s.handles = nil
	_, err := DeleteSegment(s.Name)
	return err
}

// DeleteSegment deletes every namespace of the segment called name, made
// by this process or another, and returns their names.
func DeleteSegment(name string) ([]string, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	names, err := SegmentNamespaces(name)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, ns := range names {
		if err := netns.DeleteNamed(ns); err != nil {
			errs = append(errs, err)
		}
	}
	return names, errors.Join(errs...)
}

// SegmentNamespaces lists the namespaces of the segment called name that
// exist.
func SegmentNamespaces(name string) ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("vethnet: %w", err)
	}
	var out []string
	for _, e := range ents {
		if host, ok := strings.CutPrefix(e.Name(), NSName(name, "")); ok && namePattern.MatchString(host) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// netnsDir is where named namespaces are bound.
const netnsDir = "/run/netns"
