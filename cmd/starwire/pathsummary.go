package main

import (
	"fmt"
	"strings"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/internal/units"
)

// A pathShare is what one path carried of a job's calls.
type pathShare struct {
	path         string
	calls, bytes int64
}

// jobPaths counts the job's calls and bytes per path: the tasks' calls to
// each other by the paths their transports reported, and the driver's,
// the rest of calls and bytes, over driverPath.
func jobPaths(calls, bytes int64, driverPath string, infos []peerInfo) []pathShare {
	var out []pathShare
	add := func(path string, c, b int64) {
		if c <= 0 {
			return
		}
		for i := range out {
			if out[i].path == path {
				out[i].calls, out[i].bytes = out[i].calls+c, out[i].bytes+b
				return
			}
		}
		out = append(out, pathShare{path, c, b})
	}
	dc, db := calls, bytes
	for _, i := range infos {
		if i.err != nil {
			continue
		}
		if len(i.PeerPaths) == 0 {
			add(i.PeerPath, i.PeerCalls, i.PeerBytes)
		}
		for _, p := range i.PeerPaths {
			add(p.Path.Title(), p.Calls, p.Bytes)
		}
		dc, db = dc-i.PeerCalls, db-i.PeerBytes
	}
	add(driverPath, dc, max(db, 0))
	return out
}

// describeShares writes shares as the summary's path line: "TCP 99.7% of
// calls, 99.6% of bytes; AF_XDP 0.3% of calls, 0.4% of bytes".
func describeShares(shares []pathShare) string {
	var calls, bytes int64
	for _, s := range shares {
		calls, bytes = calls+s.calls, bytes+s.bytes
	}
	if calls == 0 {
		return "no calls"
	}
	parts := make([]string, len(shares))
	for i, s := range shares {
		parts[i] = fmt.Sprintf("%s %s of calls (%d), %s of bytes", s.path, shareOf(s.calls, calls), s.calls, shareOf(s.bytes, bytes))
	}
	return strings.Join(parts, "; ")
}

func shareOf(n, of int64) string {
	if of <= 0 {
		return "0%"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// pathReason says why the tasks' calls to each other took the paths they
// did: fallback, when AF_XDP is not used, says why not; otherwise stats,
// the tasks' dual connections, say what each chose and measured.
func pathReason(fallback string, stats []afxdprpc.PathStats) string {
	switch {
	case fallback == "--afxdp off":
		return "AF_XDP off (--afxdp off)"
	case fallback != "":
		return "AF_XDP unavailable: " + fallback
	case len(stats) == 0:
		return "AF_XDP unavailable: the tasks opened no dual connections"
	}
	policy := stats[0].Policy
	if policy != "auto" {
		return "--afxdp_path " + policy + ": the tasks' calls to each other take the path it names, unmeasured"
	}
	return "auto: " + autoReason(mergeClasses(stats))
}

// A classVerdict is one size class's choice over all of a job's dual
// connections.
type classVerdict struct {
	above, atMost int64
	calls, bypass uint64  // calls, and those of connections where it takes AF_XDP
	lo, hi        float64 // AF_XDP's cost over TCP's, least and most; 0 unmeasured
	cpuLo, cpuHi  float64 // AF_XDP's CPU per call over TCP's; 0 unmeasured
	margin        float64 // the least share of TCP's cost AF_XDP must beat
}

// mergeClasses sums the connections' size classes, smallest first.
func mergeClasses(stats []afxdprpc.PathStats) []classVerdict {
	var out []classVerdict
	find := func(above int64) *classVerdict {
		for i := range out {
			if out[i].above == above {
				return &out[i]
			}
		}
		i := 0
		for i < len(out) && out[i].above < above {
			i++
		}
		out = append(out[:i], append([]classVerdict{{above: above}}, out[i:]...)...)
		return &out[i]
	}
	for _, st := range stats {
		for _, c := range st.Classes {
			v := find(c.Above)
			v.atMost, v.calls = c.AtMost, v.calls+c.Calls
			margin := c.Margin
			if c.AFXDP {
				v.bypass += c.Calls
				margin = 1 / c.Margin // the margin back to TCP, as a share of TCP's cost
			}
			if v.margin == 0 || margin < v.margin {
				v.margin = margin
			}
			if c.CPURatio > 0 {
				if v.cpuLo == 0 || c.CPURatio < v.cpuLo {
					v.cpuLo = c.CPURatio
				}
				v.cpuHi = max(v.cpuHi, c.CPURatio)
			}
			if c.TCPCost > 0 && c.AFXDPCost > 0 {
				r := float64(c.AFXDPCost) / float64(c.TCPCost)
				if v.lo == 0 || r < v.lo {
					v.lo = r
				}
				v.hi = max(v.hi, r)
			}
		}
	}
	return out
}

// autoReason says, from the classes' verdicts, which sizes took which path
// and what the measurements were.
func autoReason(classes []classVerdict) string {
	var onTCP, onXDP []classVerdict
	for _, v := range classes {
		if 2*v.bypass > v.calls {
			onXDP = append(onXDP, v)
		} else {
			onTCP = append(onTCP, v)
		}
	}
	var parts []string
	if len(onXDP) > 0 {
		parts = append(parts, "AF_XDP measured faster for "+sizeRanges(onXDP, len(onTCP) == 0)+" on this machine"+costs(onXDP, "kept"))
	}
	if len(onTCP) > 0 {
		parts = append(parts, "TCP measured faster for "+sizeRanges(onTCP, len(onXDP) == 0)+" on this machine"+costs(onTCP, "taken"))
	}
	if len(parts) == 0 {
		return "no call measured yet"
	}
	return strings.Join(parts, "; ")
}

// costs says what AF_XDP cost against TCP in classes, in time and CPU per
// call, and below what share of TCP's time it is taken (or kept, for
// classes on it), leaving out classes of under 1% of their calls.
func costs(classes []classVerdict, verb string) string {
	var lo, hi, cpuLo, cpuHi, margin float64
	least := func(a, b float64) float64 {
		if b > 0 && (a == 0 || b < a) {
			return b
		}
		return a
	}
	var calls uint64
	for _, v := range classes {
		calls += v.calls
	}
	for _, v := range classes {
		if v.calls*100 < calls {
			continue // a class of a few calls, measured by fewer
		}
		lo, hi = least(lo, v.lo), max(hi, v.hi)
		cpuLo, cpuHi = least(cpuLo, v.cpuLo), max(cpuHi, v.cpuHi)
		margin = least(margin, v.margin)
	}
	if lo == 0 {
		return " (AF_XDP not probed yet)"
	}
	cpu := "its CPU per call not measured yet"
	if cpuLo > 0 {
		cpu = "used " + ratios(cpuLo, cpuHi) + " TCP's CPU per call"
	}
	return fmt.Sprintf(" (AF_XDP took %s TCP's time per call and %s; it is %s below %.2f×)", ratios(lo, hi), cpu, verb, margin)
}

// ratios writes the range lo..hi: "0.48×", or "0.48–2.39×".
func ratios(lo, hi float64) string {
	if hi > lo*1.005 {
		return fmt.Sprintf("%.2f–%.2f×", lo, hi)
	}
	return fmt.Sprintf("%.2f×", lo)
}

// sizeRanges writes the classes' sizes as ranges, "size≤4KiB,
// 16KiB<size≤64KiB"; all says they are every class that carried calls,
// written "every size of the calls (≤64KiB)".
func sizeRanges(classes []classVerdict, all bool) string {
	if all {
		last := classes[len(classes)-1].atMost
		if last == 0 {
			return "every size of the calls"
		}
		return "every size of the calls (≤" + units.FormatSize(last) + ")"
	}
	var parts []string
	for i := 0; i < len(classes); i++ {
		j := i
		for j+1 < len(classes) && classes[j+1].above == classes[j].atMost {
			j++
		}
		r := "size"
		if classes[i].above > 0 {
			r = units.FormatSize(classes[i].above) + "<size"
		}
		if classes[j].atMost > 0 {
			r += "≤" + units.FormatSize(classes[j].atMost)
		}
		parts = append(parts, r)
		i = j
	}
	return "calls of " + strings.Join(parts, ", ")
}
