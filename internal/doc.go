// Package internal groups plumbing shared by starwire's packages: aligned
// buffer pools, syscalls, byte views of typed slices and counters. Nothing
// outside the module may import it.
package internal
