// Package tasks runs the tasks of a parameter-server cluster: each task a
// handlers.Worker served over starwire (under grpc+seastar) and over gRPC,
// the gRPC server kept for the master side as TensorFlow does, with peers
// resolved through the cluster spec and the endpoint map.
package tasks
