// Package netpath names the paths a starwire call can take between two
// tasks (Path: tcp, afxdp, udp) and reads the policy that chooses, per
// call, between tcp and afxdp on a connection that has both (Policy).
// These are the names flags, environment variables, metrics labels,
// summaries and logs use; package afxdp's documentation has the glossary.
//
// It imports nothing of starwire's but internal/units, so that every
// package that names a path (rpc, afxdp, rpc/cluster, metrics, the
// command) may use it.
package netpath
