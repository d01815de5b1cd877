// Package stress is a two-process reliability harness for starwire: an echo
// server meant to run in a process of its own, a client workload that checks
// every answer byte for byte and measures how far each call outlives its
// deadline, hostile peers speaking raw TCP, and readers of a process's
// memory from /proc. Tests and the soak command (bench/cmd/soak) share it.
//
// A program becomes a stress server by calling ChildMain early (a test
// binary does it from an init function or TestMain): when ChildEnv is set
// it serves, prints its listening address on standard output, and exits
// when standard input closes, so a parent that dies cannot leave it behind.
// Start runs such a child and reads the address.
package stress
