// Package clicks generates synthetic click data for a sparse logistic
// regression: every example has one hashed categorical feature per field,
// drawn with a power-law popularity as real ad and recommendation features
// are, and a click label drawn from a hidden true weight per hashed feature,
// so that the task is learnable and its best possible loss is known.
package clicks
