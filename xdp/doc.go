// Package xdp holds the XDP program that steers starwire's UDP traffic into
// AF_XDP sockets and passes everything else to the kernel.
package xdp
