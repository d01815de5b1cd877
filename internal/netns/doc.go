// Package netns is a test harness: two network namespaces joined by a veth
// pair, with helpers to run code inside either namespace and to add netem
// impairments. It is an ordinary package so tests of several packages can
// share it; nothing in the product imports it.
//
// Kernels built without netem make End.Netem fail with ErrNetemUnsupported
// (tests ask Require for the Netem feature). Netem never affects AF_XDP
// traffic anyway: copy-mode transmission bypasses qdiscs and XDP runs
// before them on receive. Loss on the AF_XDP path is injected by the
// steering program instead (xdp.Options.Loss).
package netns
