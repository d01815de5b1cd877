// Package link holds the links the packet protocol runs over: AF_XDP
// sockets on an interface's queues steered by package xdp (XSKLink, with
// neighbour resolution, a watch on the interface's state and packet
// capture hooks), a kernel UDP socket (UDPLink) and an in-memory pair with
// loss, reordering and duplication (MemPair). A Link only moves datagrams;
// it knows nothing of sessions.
//
// Ownership: a Link is driven by one goroutine at a time (see Link);
// Wake, and the methods documented so, are safe from any goroutine.
package link
