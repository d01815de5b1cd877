package xdp

import (
	"errors"
	"fmt"
	"math"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Map names, as they appear in bpftool.
const (
	mapXSKs     = "sw_xsks"
	mapPorts    = "sw_ports"
	mapAllow    = "sw_allow"
	mapConfig   = "sw_config"
	mapCounters = "sw_counters"
	progName    = "sw_steer"
)

// Defaults for zero Options fields.
const (
	DefaultQueues   = 64
	DefaultMaxPeers = 4096
	maxPorts        = 64
)

// ErrNotIPv4 is returned for addresses the allowlist cannot hold.
var ErrNotIPv4 = errors.New("not an IPv4 address")

// Options configure Load. The zero Options steer nothing (no ports).
type Options struct {
	// Ports are the UDP destination ports whose IPv4 packets go to AF_XDP
	// sockets (at most 64).
	Ports []uint16
	// Allow lists the peers allowed to send to Ports. When Allowlist is set
	// or Allow is not empty, packets to Ports from other sources are
	// dropped and counted.
	Allow     []netip.Addr
	Allowlist bool
	// Queues is the number of RX queue slots in the socket map
	// (default 64); queue indexes at or above it are passed to the kernel.
	Queues int
	// MaxPeers sizes the allowlist (default 4096).
	MaxPeers int
	// Loss is fault injection for tests: the fraction in [0, 1] of
	// packets to Ports dropped at random (and counted as Impaired), since
	// AF_XDP traffic bypasses qdiscs such as netem. It is built into the
	// program at Load; at zero the program has no impairment code at all.
	Loss float64
}

// Program is the loaded steering program and its maps. The map methods
// (RegisterSocket, Allow, SetAllowlist, Counters, ...) are safe for
// concurrent use; Attach, AttachMode and Close are not.
type Program struct {
	coll     *ebpf.Collection
	prog     *ebpf.Program
	xsks     *ebpf.Map
	allow    *ebpf.Map
	config   *ebpf.Map
	counters *ebpf.Map
	links    []link.Link
}

func (o Options) spec() (*ebpf.CollectionSpec, error) {
	if o.Queues == 0 {
		o.Queues = DefaultQueues
	}
	if o.MaxPeers == 0 {
		o.MaxPeers = DefaultMaxPeers
	}
	if len(o.Ports) > maxPorts {
		return nil, fmt.Errorf("xdp: %d ports, at most %d", len(o.Ports), maxPorts)
	}
	loss, err := lossThreshold(o.Loss)
	if err != nil {
		return nil, err
	}
	return &ebpf.CollectionSpec{
		Maps: map[string]*ebpf.MapSpec{
			mapXSKs:     {Name: mapXSKs, Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(o.Queues)},
			mapPorts:    {Name: mapPorts, Type: ebpf.Hash, KeySize: 2, ValueSize: 1, MaxEntries: maxPorts},
			mapAllow:    {Name: mapAllow, Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: uint32(o.MaxPeers)},
			mapConfig:   {Name: mapConfig, Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: numConfig},
			mapCounters: {Name: mapCounters, Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(numCounters)},
		},
		Programs: map[string]*ebpf.ProgramSpec{
			progName: {Name: progName, Type: ebpf.XDP, License: "Dual MIT/GPL", Instructions: instructions(loss)},
		},
	}, nil
}

// Load verifies and loads the program and fills its maps from opts. The
// program is not attached anywhere yet.
func Load(opts Options) (_ *Program, err error) {
	spec, err := opts.spec()
	if err != nil {
		return nil, err
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("xdp: load: %+v", ve)
		}
		return nil, fmt.Errorf("xdp: load: %w", err)
	}
	p := &Program{
		coll: coll, prog: coll.Programs[progName],
		xsks: coll.Maps[mapXSKs], allow: coll.Maps[mapAllow],
		config: coll.Maps[mapConfig], counters: coll.Maps[mapCounters],
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	for _, port := range opts.Ports {
		key := [2]byte{byte(port >> 8), byte(port)}
		if err := coll.Maps[mapPorts].Put(key, uint8(1)); err != nil {
			return nil, fmt.Errorf("xdp: add port %d: %w", port, err)
		}
	}
	for _, a := range opts.Allow {
		if err := p.Allow(a); err != nil {
			return nil, err
		}
	}
	if err := p.SetAllowlist(opts.Allowlist || len(opts.Allow) > 0); err != nil {
		return nil, err
	}
	return p, nil
}

// BPF returns the loaded program, for tests and for attaching elsewhere.
func (p *Program) BPF() *ebpf.Program { return p.prog }

// RegisterSocket makes queue's packets to the steered ports go to the
// AF_XDP socket fd. The map holds its own reference to the socket: until
// UnregisterSocket (or Close of the program), closing fd does not release
// the socket or its queue, and a new socket on that queue fails to bind.
func (p *Program) RegisterSocket(queue, fd int) error {
	if err := p.xsks.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("xdp: register socket for queue %d: %w", queue, err)
	}
	return nil
}

// UnregisterSocket removes queue's socket; its packets go to the kernel.
func (p *Program) UnregisterSocket(queue int) error {
	if err := p.xsks.Delete(uint32(queue)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("xdp: unregister socket for queue %d: %w", queue, err)
	}
	return nil
}

func ipv4Key(addr netip.Addr) ([4]byte, error) {
	addr = addr.Unmap()
	if !addr.Is4() {
		return [4]byte{}, fmt.Errorf("xdp: allow %s: %w", addr, ErrNotIPv4)
	}
	return addr.As4(), nil
}

// Allow adds addr to the allowlist.
func (p *Program) Allow(addr netip.Addr) error {
	key, err := ipv4Key(addr)
	if err != nil {
		return err
	}
	if err := p.allow.Put(key, uint8(1)); err != nil {
		return fmt.Errorf("xdp: allow %s: %w", addr, err)
	}
	return nil
}

// Disallow removes addr from the allowlist.
func (p *Program) Disallow(addr netip.Addr) error {
	key, err := ipv4Key(addr)
	if err != nil {
		return err
	}
	if err := p.allow.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("xdp: disallow %s: %w", addr, err)
	}
	return nil
}

// SetAllowlist turns source filtering of steered packets on or off.
func (p *Program) SetAllowlist(enabled bool) error {
	var v uint32
	if enabled {
		v = 1
	}
	if err := p.config.Put(uint32(cfgAllowlist), v); err != nil {
		return fmt.Errorf("xdp: set allowlist: %w", err)
	}
	return nil
}

// lossThreshold turns a loss rate (Options.Loss) into the bound a random
// u32 is dropped below.
func lossThreshold(rate float64) (uint32, error) {
	if rate < 0 || rate > 1 || math.IsNaN(rate) {
		return 0, fmt.Errorf("xdp: loss rate %v outside [0, 1]", rate)
	}
	return uint32(min(rate*(1<<32), math.MaxUint32)), nil
}

// Counters returns the counters summed over CPUs.
func (p *Program) Counters() (Counters, error) {
	var c Counters
	dst := []*uint64{&c.Redirected, &c.Passed, &c.NoSocket, &c.NotAllowed, &c.Malformed, &c.Impaired}
	var per []uint64
	for i, d := range dst {
		if err := p.counters.Lookup(uint32(i), &per); err != nil {
			return c, fmt.Errorf("xdp: read counter %d: %w", i, err)
		}
		for _, v := range per {
			*d += v
		}
	}
	return c, nil
}

// Close detaches the program from every interface it was attached to and
// releases the program and maps. AF_XDP sockets stay open (they are the
// caller's) but receive nothing more.
func (p *Program) Close() error {
	var errs []error
	for _, l := range p.links {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("xdp: detach: %w", err))
		}
	}
	p.links = nil
	if p.coll != nil {
		p.coll.Close()
		p.coll = nil
	}
	return errors.Join(errs...)
}
