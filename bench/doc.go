// Package bench holds starwire's benchmarks and the load generator that
// compares it with gRPC-Go in one run.
package bench
