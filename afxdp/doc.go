// Package afxdp is the kernel-bypass path: AF_XDP sockets, their rings and
// UMEM, a reactor per queue, and a reliable packet transport that also runs
// over a kernel UDP socket and an in-memory link.
package afxdp
