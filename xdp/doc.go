// Package xdp holds the XDP program that steers starwire's UDP traffic into
// AF_XDP sockets and passes everything else to the kernel.
//
// The program is written with the asm package of cilium/ebpf, so building
// needs no C toolchain. For each frame it checks Ethernet, IPv4 (honouring
// the header length, so options are fine) and UDP; a packet whose
// destination port is in the ports map is redirected to the socket
// registered for its RX queue, or passed when there is none. When the
// allowlist is enabled, steered packets from sources not on it are dropped.
// ARP, TCP, ICMP, fragments and other ports always go to the kernel, so ssh
// and ping keep working. Per-CPU counters record each outcome.
//
// Attachments are bpf_links: they end with Close or with the process.
//
// Register a socket on every RX queue of the interface: a packet on a
// queue without one goes to the kernel (counted as NoSocket). On veth in
// native mode flows spread over the queues; in generic mode this kernel
// reported every packet on queue 0.
package xdp
