// Package bench holds starwire's benchmarks and the load generator that
// compares it with gRPC-Go and a raw TCP baseline in one run.
//
// Three contenders serve the same calls: starwire (rpc.Server with inline
// handlers), gRPC-Go (a unary service on wrapper messages, default options
// but for raised message size limits) and raw TCP (length-prefixed frames,
// echoed in batches, or blocks of bytes written straight from a buffer).
// The benchmarks run them as sub-benchmarks of one invocation and print the
// project's targets as ratios of figures from that run; they report the
// targets and never fail on them, because a single run on a shared machine
// is noisy and a -benchtime=1x smoke run measures nothing:
//
//	go test -run '^$' -bench . -count 3 ./bench
//
// cmd/echoserver serves the three in a process of its own; cmd/loadgen puts
// a load on each and prints one comparison table.
package bench
