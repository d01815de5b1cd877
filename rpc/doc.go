// Package rpc is starwire's RPC core: client, server, method table and the
// message-level transport interface. It holds no transport and imports
// none: the TCP transport every peer can fall back to is package rpc/tcp,
// the packet transport afxdp/afxdprpc, and a client is given the one it
// dials with (ClientOptions.Transport; NewClient panics without one), a
// server the listener it serves. Status errors are package wire/status's
// (rpc.Status and friends are the same names); cluster configuration
// (cluster specs, TF_CONFIG, the endpoint map, the environment) is in
// rpc/cluster.
//
// The seam between the core and a transport is Transport, Listener and
// Conn (transport.go) and wire.Receiver, plus the capabilities in
// capabilities.go that a connection or a receiver may offer beyond them
// (read-side flow control, the path each call took, taking a request
// back, ...). A transport in its own package, or a wrapper of a
// connection, offers or forwards each of those by implementing the
// exported interface, checked at compile time and, for the module's
// wrappers, by internal/seamtest. A caller reading its own answer off a
// stream connection is the core's business with rpc/tcp
// (internal/readside), not part of this API. What the core shares with
// every transport stays here: ErrClosed, the plaintext refusal
// (ErrPlaintext, PlaintextRefusal, PlaintextWatcher).
package rpc
