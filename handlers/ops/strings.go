package ops

import (
	"fmt"
	"slices"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// The string ops of TensorFlow's Saver graphs: they make the file names a
// sharded save writes to, "<prefix>_temp/part-00000-of-00002".

func init() {
	registerOp("ShardedFilename", &Spec{Inputs: exactly(3), NumOutputs: exactly(1), Build: buildShardedFilename})
	registerOp("ShardedFilespec", &Spec{Inputs: exactly(2), NumOutputs: exactly(1), Build: buildShardedFilespec})
	registerOp("StringJoin", &Spec{Defaults: map[string]*tfpb.AttrValue{"separator": stringAttr("")},
		Inputs: byInt("N", 1), NumOutputs: exactly(1), Build: buildStringJoin})
}

// newStrings returns a DTString tensor of shape holding elems, in a
// pooled buffer owned by the caller.
func newStrings(shape []int64, elems [][]byte) wire.Tensor {
	size := 0
	for _, e := range elems {
		size += len(e) + 10
	}
	buf := wire.NewBuffer(size)
	data := wire.AppendStrings(buf.Bytes()[:0], elems)
	return wire.Tensor{DType: wire.DTString, Shape: shape, Data: data, Buf: buf}
}

// legacyScalar reports whether t holds one element as TensorFlow's
// IsLegacyScalar allows: a scalar, or a vector of one.
func legacyScalar(t *wire.Tensor) bool {
	return len(t.Shape) == 0 || (len(t.Shape) == 1 && t.Shape[0] == 1)
}

// scalarString returns the value of a string scalar (or vector of one).
func scalarString(t *wire.Tensor, what string) (string, error) {
	if t.DType != wire.DTString || !legacyScalar(t) {
		return "", status.Errorf(wire.InvalidArgument, "%s must be a string scalar, is %v%v", what, t.DType, t.Shape)
	}
	s, err := t.Strings(nil)
	if err != nil {
		return "", status.Errorf(wire.InvalidArgument, "%s: %v", what, err)
	}
	return string(s[0]), nil
}

// scalarInt32 returns the value of an int32 scalar (or vector of one).
func scalarInt32(t *wire.Tensor, what string) (int32, error) {
	if t.DType != wire.DTInt32 || !legacyScalar(t) {
		return 0, status.Errorf(wire.InvalidArgument, "%s must be an int32 scalar, is %v%v", what, t.DType, t.Shape)
	}
	v, _ := indices(t)
	return int32(v[0]), nil
}

// buildShardedFilename builds ShardedFilename(basename, shard,
// num_shards): "<basename>-<shard>-of-<num_shards>", both numbers in five
// digits, as TensorFlow names the files of a sharded checkpoint.
func buildShardedFilename(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		var in [3]*wire.Tensor
		if err := c.inputs(in[:]); err != nil {
			return err
		}
		base, err := scalarString(in[0], "basename")
		if err != nil {
			return err
		}
		shard, err := scalarInt32(in[1], "shard")
		if err != nil {
			return err
		}
		num, err := scalarInt32(in[2], "num_shards")
		if err != nil {
			return err
		}
		name := fmt.Sprintf("%s-%05d-of-%05d", base, shard, num)
		c.setOut(0, newStrings(nil, [][]byte{[]byte(name)}))
		return nil
	}, nil
}

// buildShardedFilespec builds ShardedFilespec(basename, num_shards):
// "<basename>-?????-of-<num_shards>", the pattern of every shard's name.
func buildShardedFilespec(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		var in [2]*wire.Tensor
		if err := c.inputs(in[:]); err != nil {
			return err
		}
		base, err := scalarString(in[0], "basename")
		if err != nil {
			return err
		}
		num, err := scalarInt32(in[1], "num_shards")
		if err != nil {
			return err
		}
		spec := fmt.Sprintf("%s-?????-of-%05d", base, num)
		c.setOut(0, newStrings(nil, [][]byte{[]byte(spec)}))
		return nil
	}, nil
}

// buildStringJoin builds StringJoin(inputs..., separator): the inputs
// joined element by element. They have one shape, or are scalars, which
// stand for every element of the others' shape.
func buildStringJoin(_ *Env, n *Node) (Kernel, error) {
	sep, err := n.attrString("separator")
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		elems := make([][][]byte, n.NumInputs)
		var shape []int64
		shaped := -1 // the first input that is not a scalar
		for i := range elems {
			t, err := c.typed(i, wire.DTString)
			if err != nil {
				return err
			}
			if elems[i], err = t.Strings(nil); err != nil {
				return status.Errorf(wire.InvalidArgument, "input %d: %v", i, err)
			}
			if len(t.Shape) == 0 {
				continue
			}
			if shaped < 0 {
				shaped, shape = i, t.Shape
			} else if !slices.Equal(shape, t.Shape) {
				return status.Errorf(wire.InvalidArgument, "input %d has shape %v, input %d %v: inputs must have one shape or be scalars", shaped, shape, i, t.Shape)
			}
		}
		count := 1
		if shaped >= 0 {
			count = len(elems[shaped])
		}
		out := make([][]byte, count)
		for j := range out {
			var b []byte
			for i, e := range elems {
				if i > 0 {
					b = append(b, sep...)
				}
				b = append(b, e[j%len(e)]...) // a scalar's one element, or element j
			}
			out[j] = b
		}
		c.setOut(0, newStrings(append([]int64(nil), shape...), out))
		return nil
	}, nil
}
