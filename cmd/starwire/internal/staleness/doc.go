// Package staleness measures how old the parameters held by workers are when
// a trainer publishes a new version at a fixed rate and workers pull the
// newest at a fixed rate, over starwire and over gRPC.
//
// Staleness is sampled by every worker every step interval as the trainer's
// current version minus the version the worker holds, so it includes the
// time versions spend in flight on both the push and the pull.
package staleness
