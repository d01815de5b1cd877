// Package handlers implements TensorFlow's WorkerService over a
// parameter-server runtime: rendezvous, graph registry, ops and variables.
package handlers
