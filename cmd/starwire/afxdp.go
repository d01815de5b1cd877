package main

import "os"

// afxdpUnavailable says why the AF_XDP transport cannot carry this run, or
// "" when it can.
func afxdpUnavailable() string {
	if os.Geteuid() != 0 {
		return "AF_XDP needs root (CAP_NET_ADMIN and CAP_BPF)"
	}
	return "this build's afxdp package offers its reliable protocol over kernel UDP and in-memory links only, no AF_XDP socket link yet"
}
