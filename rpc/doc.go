// Package rpc is starwire's RPC core: client, server, method table and the
// message-level transport interface, with the TCP transport that every peer
// can fall back to. Status errors are package wire/status's (rpc.Status and
// friends are the same names); cluster configuration (cluster specs,
// TF_CONFIG, the endpoint map, the environment) is in rpc/cluster.
//
// The seam between the core and a transport is Transport, Listener and
// Conn (transport.go) and wire.Receiver, plus the capabilities in
// capabilities.go that a connection or a receiver may offer beyond them
// (a caller reading its own answer, read-side flow control, the path each
// call took, ...). A transport in another package, or a wrapper of a
// connection, offers or forwards each of those by implementing the
// exported interface, checked at compile time.
package rpc
