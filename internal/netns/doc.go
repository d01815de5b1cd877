// Package netns holds starwire's network-namespace code, used by the
// product and by tests alike: running code or starting a process inside a
// namespace from a locked thread that returns where it was (Do, Go),
// creating named and anonymous namespaces without moving the caller
// (NewNamed, NewAnonymous), and, for tests and benchmarks, Pair, two
// namespaces joined by a veth pair, with Probe and ProbeNetem to tell
// whether the machine has what they need, and netem impairments. Tests
// gate on those through package netnstest, which alone imports testing.
//
// Kernels built without netem make End.Netem fail with ErrNetemUnsupported
// (tests ask netnstest.Require for the Netem feature). Netem never affects AF_XDP
// traffic anyway: copy-mode transmission bypasses qdiscs and XDP runs
// before them on receive. Loss on the AF_XDP path is injected by the
// steering program instead (xdp.Options.Loss).
package netns
