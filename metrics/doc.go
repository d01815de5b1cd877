// Package metrics exports what starwire does to Prometheus: calls per
// method and path (counts by status, latency, bytes, calls in flight)
// through rpc interceptors, and the packet path's counters (retransmissions,
// duplicates, XDP verdicts) through collectors read at scrape time.
//
// The names are listed in the README. A Metrics is safe for concurrent
// use; its interceptors cost a map lookup, a clock read and a few atomic
// adds per call, and no allocation once a method's series exist.
package metrics
