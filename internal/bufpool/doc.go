// Package bufpool hands out 64-byte-aligned, reference-counted byte buffers
// pooled by power-of-two size class. Tensor bytes are received straight into
// these buffers, so their alignment is what lets a receiver view them as
// typed slices without copying.
package bufpool
