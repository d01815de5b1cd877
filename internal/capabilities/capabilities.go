// Package capabilities drops the Linux capabilities a process no longer
// needs once its privileged set-up is done, on every thread of the process
// (capabilities are per thread; libcap's psx runs the system calls on all
// of Go's threads, cgo or not).
package capabilities

import (
	"fmt"
	"strings"

	"kernel.org/pub/linux/libs/security/libcap/cap"
)

// AFXDPRebind is what a process serving AF_XDP keeps: what opening and
// binding an AF_XDP socket again after its link flaps needs. CAP_NET_RAW
// creates an AF_XDP socket; CAP_IPC_LOCK registers its UMEM beyond
// RLIMIT_MEMLOCK. The XDP program stays attached through a flap (its
// bpf_link holds it), and its maps are reached through descriptors the
// process already holds, so CAP_BPF, CAP_NET_ADMIN and CAP_SYS_ADMIN go.
var AFXDPRebind = []cap.Value{cap.NET_RAW, cap.IPC_LOCK}

// Drop leaves the process, on every thread, with at most keep in its
// permitted and effective sets, and nothing inheritable or ambient; the
// bounding set loses the rest too when the process may change it
// (CAP_SETPCAP), so that no later exec regains them. It is not undone.
// It returns the capabilities it removed from the effective set, by name.
func Drop(keep ...cap.Value) ([]string, error) {
	cur := cap.GetProc()
	kept := map[cap.Value]bool{}
	for _, v := range keep {
		kept[v] = true
	}
	var dropped []string
	var boundDrop []cap.Value
	for v := cap.Value(0); v < cap.MaxBits(); v++ {
		if kept[v] {
			continue
		}
		if on, _ := cur.GetFlag(cap.Effective, v); on {
			dropped = append(dropped, Name(v))
		}
		if in, err := cap.GetBound(v); err == nil && in {
			boundDrop = append(boundDrop, v)
		}
	}
	if setpcap, _ := cur.GetFlag(cap.Effective, cap.SETPCAP); setpcap && len(boundDrop) > 0 {
		if err := cap.DropBound(boundDrop...); err != nil {
			return nil, fmt.Errorf("capabilities: drop from the bounding set: %w", err)
		}
	}
	if err := cap.ResetAmbient(); err != nil {
		return nil, fmt.Errorf("capabilities: clear the ambient set: %w", err)
	}
	next := cap.NewSet()
	for v := range kept {
		if on, _ := cur.GetFlag(cap.Permitted, v); !on {
			continue
		}
		if err := next.SetFlag(cap.Permitted, true, v); err != nil {
			return nil, fmt.Errorf("capabilities: %w", err)
		}
		if err := next.SetFlag(cap.Effective, true, v); err != nil {
			return nil, fmt.Errorf("capabilities: %w", err)
		}
	}
	if err := next.SetProc(); err != nil {
		return nil, fmt.Errorf("capabilities: set %s: %w", next, err)
	}
	return dropped, nil
}

// Name is v's name as capabilities(7) writes it: CAP_NET_RAW.
func Name(v cap.Value) string { return strings.ToUpper(v.String()) }
