package xdp

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/link"
)

// Mode is how the program is attached to an interface.
type Mode int

const (
	// ModeAuto tries native, then generic.
	ModeAuto Mode = iota
	// ModeNative runs the program in the driver (veth supports it).
	ModeNative
	// ModeGeneric runs it on the kernel's skb path; on veth it measured
	// lower latency than native.
	ModeGeneric
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case ModeNative:
		return "native"
	case ModeGeneric:
		return "generic"
	default:
		return "auto"
	}
}

// ErrAttach is wrapped when the program can be attached in no mode.
var ErrAttach = errors.New("cannot attach XDP program")

// Attach attaches the program to ifindex, trying native mode then generic,
// and returns the mode used. The attachment is a bpf_link, so it also ends
// when the process dies. ifindex is resolved in the calling thread's
// network namespace.
func (p *Program) Attach(ifindex int) (Mode, error) {
	return p.AttachMode(ifindex, ModeAuto)
}

// AttachMode attaches in the given mode (ModeAuto: native, then generic)
// and returns the mode used.
func (p *Program) AttachMode(ifindex int, mode Mode) (Mode, error) {
	try := []Mode{mode}
	if mode == ModeAuto {
		try = []Mode{ModeNative, ModeGeneric}
	}
	var errs []error
	for _, m := range try {
		flags := link.XDPDriverMode
		if m == ModeGeneric {
			flags = link.XDPGenericMode
		}
		l, err := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: ifindex, Flags: flags})
		if err == nil {
			p.links = append(p.links, l)
			return m, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", m, err))
	}
	return ModeAuto, fmt.Errorf("xdp: attach to ifindex %d: %w: %w", ifindex, ErrAttach, errors.Join(errs...))
}
