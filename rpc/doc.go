// Package rpc is starwire's RPC core: client, server, method table, status
// errors, cluster configuration and the message-level transport interface,
// with the TCP transport that every peer can fall back to.
package rpc
