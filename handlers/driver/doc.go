// Package driver is the master side of a distributed TensorFlow-style job:
// it creates worker sessions on every task, registers partition graphs,
// runs steps with feeds and fetches, and cleans up, over either starwire or
// gRPC behind one Caller interface.
//
// Feeds and fetches follow TensorFlow's distributed master: a feed is the
// client-terminated _Recv whose rendezvous key (rendezvous.CreateKey) is the
// feed's key, a fetch the client-terminated _Send whose key is the fetch's.
package driver
