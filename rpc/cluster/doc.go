// Package cluster holds the configuration of a TensorFlow cluster as its
// users write it: cluster specs and task names, TF_CONFIG, the protocol
// names (grpc, grpc+seastar), the .endpoint_map that gives each task its
// starwire address, a registry directory for tasks started on port 0, and
// the reactor counts of the environment. It imports rpc; rpc never imports
// it.
package cluster
