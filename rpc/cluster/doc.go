// Package cluster holds the configuration of a TensorFlow cluster as its
// users write it: cluster specs and task names, TF_CONFIG, the protocol
// names (grpc, grpc+seastar), the .endpoint_map that gives each task its
// starwire address, a registry directory for tasks started on port 0, and
// the environment. It is the one package of starwire that reads
// environment variables (EnvVars lists them, CheckEnv checks them): rpc,
// afxdp and handlers take the plain values it returns (CoreNumber,
// Reactors, PacketReactors, PacketPolling, AFXDPPath, ...) as options.
// It imports rpc; rpc never imports it.
package cluster
