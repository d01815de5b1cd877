// Package afxdpfabric builds the AF_XDP fabric the in-process clusters
// and benchmarks run their calls over: an AF_XDP endpoint opened on an
// interface inside a network namespace (OpenEndpoint), and a fabric of
// them (Build): a veth pair between every worker and every parameter
// server (package vethnet) with an endpoint on both ends, and the dual
// transports that send each end's calls to the other over its link
// (Fabric.Dual). Package tasks, the staleness benchmark and package bench
// build theirs with it; XDP never sees loopback traffic, so AF_XDP needs
// an interface at each end.
package afxdpfabric
