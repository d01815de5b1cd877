// Package changes is a stream of an embedding table's changes for online
// serving: a Writer on the ps exports, per version, the rows changed and
// the ids evicted since the previous version into a directory, and a
// Follower in a serving process replays them into a table of its own.
//
// # The directory
//
// Version N is the files vNNNNNNNNNNNN-KKK.part, one per table (its
// changed rows and evicted ids, or all its rows), and the manifest
// vNNNNNNNNNNNN.manifest, written last: it names the version's parts
// with their sizes and CRC-32C checksums, so a follower that sees a
// manifest finds every part complete, and refuses a part whose checksum
// disagrees before it applies anything of the version.
//
// # Exactly once
//
// The manifests are the writer's record of what it exported: a writer
// opened on a directory goes on at the version after the newest manifest
// and never writes a version that has one (a manifest is published by a
// hard link, which fails where one exists). A ps that restarts restores
// its tables from a checkpoint older than what it had exported, so the
// first version a writer writes (and the first after a table is restored)
// holds the tables in full and is marked a base: a follower replaces its
// table with it, dropping rows the checkpoint does not have, and a new
// follower starts at the newest base.
package changes
