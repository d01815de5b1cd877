package checkpoint

import "fmt"

// IndexFile returns the index file of the checkpoint under prefix.
func IndexFile(prefix string) string { return prefix + ".index" }

// DataFile returns the data file of shard of numShards under prefix, named
// as TensorFlow names it.
func DataFile(prefix string, shard, numShards int) string {
	return fmt.Sprintf("%s.data-%05d-of-%05d", prefix, shard, numShards)
}
