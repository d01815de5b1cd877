// Package packet writes and reads Ethernet/IPv4/UDP headers in place in a
// frame, with correct IPv4 and UDP checksums and without allocating; it is
// what an AF_XDP sender uses instead of the kernel's network stack.
package packet
