// Package staleness measures how old the parameters held by workers are when
// a trainer makes a new version at a fixed rate, over starwire (TCP or
// AF_XDP), gRPC, and a directory of files, the benchmark's own baseline.
//
// In pull mode the trainer pushes each version to a parameter server and
// every worker pulls the newest at a fixed rate. In push mode workers do
// not poll: each holds one standing call that the trainer answers with
// every version as it makes it, every answer from the version's one
// buffer (over starwire the same memory goes to every worker, no copy per
// worker; gRPC marshals a copy for each). This is one send per worker, not
// IP multicast, which would send each packet once for all of them.
//
// Staleness is sampled by every worker every step interval as the trainer's
// current version minus the version the worker holds, so it includes the
// time versions spend in flight on both the push and the pull.
package staleness
