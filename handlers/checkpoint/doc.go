// Package checkpoint reads and writes TensorFlow's checkpoint format
// (tensor_bundle V2), byte for byte as TensorFlow does: a checkpoint under
// prefix P is P.index, a sorted table (package table) mapping each tensor
// name to a BundleEntryProto, with a BundleHeaderProto under the empty key,
// and data files P.data-SSSSS-of-NNNNN holding the tensors' bytes, unpadded.
//
// Numeric tensors are stored as their little-endian bytes; string tensors
// as every element's varint64 length, a 4-byte masked crc32c of the lengths,
// then the elements' bytes. A tensor saved in slices (a partitioned
// variable) has an entry under its name listing the slices, and one entry
// per slice under TensorFlow's ordered-code slice key.
//
// Names are opaque: TensorFlow 2's object-based names
// ("dense/kernel/.ATTRIBUTES/VARIABLE_VALUE", "_CHECKPOINTABLE_OBJECT_GRAPH")
// are stored and read like any other.
//
// The directory's `checkpoint` file (a text-format CheckpointState) names
// the newest checkpoint; ReadState, Latest and Keep maintain it as
// tf.train.Saver and tf.train.CheckpointManager do.
package checkpoint
