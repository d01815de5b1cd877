// Package rpc is starwire's RPC core: client, server, method table and the
// message-level transport interface, with the TCP transport that every peer
// can fall back to. Status errors are package wire/status's (rpc.Status and
// friends are the same names); cluster configuration (cluster specs,
// TF_CONFIG, the endpoint map, the environment) is in rpc/cluster.
package rpc
