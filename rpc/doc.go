// Package rpc is starwire's RPC core: client, server, method table, status
// errors and the message-level transport interface, with the TCP transport
// that every peer can fall back to. Cluster configuration (cluster specs,
// TF_CONFIG, the endpoint map) is in rpc/cluster.
package rpc
