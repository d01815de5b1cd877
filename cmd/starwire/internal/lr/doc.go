// Package lr is a sparse logistic-regression model with an embedding
// table, a train.Model that a train.Session trains on a
// parameter-server cluster through a driver, laid out as
// TensorFlow lays out a partitioned embedding: the table is sharded over
// the parameter servers as fixed_size_partitioner shards it (id lives on
// server id mod PS, at row id / PS; shard s holds those rows), each a
// resource variable. Each step runs one partition per task, as a
// TensorFlow master would: worker r, fed the batch, looks each distinct id
// up once (Unique), splits the ids among the servers (DynamicPartition)
// and sends each server only its shard's ids; each server gathers their
// rows and sends them back; the worker puts the rows back in order
// (DynamicStitch), computes the forward and backward pass, sums the
// gradients of repeated ids (UnsortedSegmentSum), and sends each server its
// shard's gradients, which the server applies with Adagrad. Tensors move
// between tasks with RecvTensor, so a server moves only its rows.
package lr
