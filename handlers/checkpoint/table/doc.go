// Package table reads and writes the sorted string tables of TensorFlow's
// checkpoint index, a LevelDB-format file: data blocks of prefix-compressed
// keys with restart points, each followed by a 5-byte trailer (compression
// type, masked crc32c), a metaindex block (empty in TensorFlow's tables), an
// index block holding one shortened separator key per data block, and a
// 48-byte footer ending in the magic 0xdb4775248b80fb57.
//
// The writer reproduces TensorFlow's table_builder.cc byte for byte: 256 KiB
// blocks, a restart every 16 keys, the bytewise comparator's shortest
// separator and successor as index keys, and, when compression is asked
// for, a snappy block only if it saves more than 12.5%. TensorFlow writes
// checkpoint indexes uncompressed, but its reader accepts snappy blocks, and
// so does this one.
//
// github.com/syndtr/goleveldb/leveldb/table reads TensorFlow's index and,
// with the same options, writes it back byte-identical. It is not used
// because the reader here works on an index already in memory, bounds
// every allocation by the file's size (the index comes from disk that may
// be damaged or hostile), names the file and the block in its errors, and
// costs no dependency beyond snappy.
package table
