// Package netns holds starwire's network-namespace code, used by the
// product and by tests alike: running code or starting a process inside a
// namespace from a locked thread that returns where it was (Do, Go),
// creating named and anonymous namespaces without moving the caller
// (NewNamed, NewAnonymous), and, for tests and benchmarks, Pair, two
// namespaces joined by a veth pair, with Require to skip or fail where the
// machine lacks what they need, and netem impairments.
//
// Kernels built without netem make End.Netem fail with ErrNetemUnsupported
// (tests ask Require for the Netem feature). Netem never affects AF_XDP
// traffic anyway: copy-mode transmission bypasses qdiscs and XDP runs
// before them on receive. Loss on the AF_XDP path is injected by the
// steering program instead (xdp.Options.Loss).
package netns
