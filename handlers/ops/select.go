package ops

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// The ops by which TensorFlow's Saver graphs pick the temporary suffix of
// a sharded save: where(regex_full_match(prefix, "^s3://.*"), ".part",
// "_temp/part"), which is StaticRegexFullMatch for a pattern known when
// the graph is built, and the PlaceholderWithDefault that holds the
// prefix.

func init() {
	registerOp("RegexFullMatch", &Spec{Build: buildRegexFullMatch})
	registerOp("StaticRegexFullMatch", &Spec{Build: buildStaticRegexFullMatch})
	registerOp("Select", &Spec{Build: buildSelect})
	registerOp("SelectV2", &Spec{Build: buildSelect})
	registerOp("PlaceholderWithDefault", &Spec{Build: buildPlaceholderWithDefault})
}

// buildRegexFullMatch builds RegexFullMatch(input, pattern): whether each
// string matches pattern whole. TensorFlow's patterns are RE2's, which
// package regexp implements.
func buildRegexFullMatch(_ *Env, n *Node) (Kernel, error) {
	if err := n.wantInputs(2); err != nil {
		return nil, err
	}
	n.NumOutputs = 1
	return func(c *Context) error {
		p, err := c.input(1)
		if err != nil {
			return err
		}
		pattern, err := scalarString(p, "pattern")
		if err != nil {
			return err
		}
		re, err := fullMatch(pattern)
		if err != nil {
			return err
		}
		return matchAll(c, re)
	}, nil
}

// fullMatch compiles pattern to match whole strings only.
func fullMatch(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return nil, rpc.Errorf(wire.InvalidArgument, "pattern %q: %v", pattern, err)
	}
	return re, nil
}

// matchAll sets output 0 to whether each element of input 0 matches re.
func matchAll(c *Context, re *regexp.Regexp) error {
	in, err := c.typed(0, wire.DTString)
	if err != nil {
		return err
	}
	elems, err := in.Strings(nil)
	if err != nil {
		return rpc.Errorf(wire.InvalidArgument, "input: %v", err)
	}
	r, err := tensor.New(wire.DTBool, in.Shape)
	if err != nil {
		return err
	}
	for i, e := range elems {
		r.Data[i] = 0
		if re.Match(e) {
			r.Data[i] = 1
		}
	}
	c.setOut(0, r)
	return nil
}

// buildStaticRegexFullMatch builds StaticRegexFullMatch(input), its
// pattern an attribute, compiled once.
func buildStaticRegexFullMatch(_ *Env, n *Node) (Kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	pattern, err := n.attrString("pattern")
	if err != nil {
		return nil, err
	}
	re, err := fullMatch(pattern)
	if err != nil {
		return nil, err
	}
	n.NumOutputs = 1
	return func(c *Context) error { return matchAll(c, re) }, nil
}

// buildSelect builds Select and SelectV2(condition, t, e): t's elements
// where condition holds, e's elsewhere. t and e have one shape; condition
// has it too, or is a scalar choosing all of one, or (Select) a vector
// choosing rows. SelectV2's other broadcasts are not supported.
func buildSelect(_ *Env, n *Node) (Kernel, error) {
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	dt, err := n.attrType("T")
	if err != nil {
		return nil, err
	}
	if dt != wire.DTString && dt.Size() == 0 {
		return nil, fmt.Errorf("attr \"T\" is %v, not a tensor's element type", dt)
	}
	n.NumOutputs = 1
	return func(c *Context) error {
		cond, err := c.typed(0, wire.DTBool)
		if err != nil {
			return err
		}
		var te [2]*wire.Tensor
		for i := range te {
			if te[i], err = c.typed(1+i, dt); err != nil {
				return err
			}
		}
		t, e := te[0], te[1]
		if !slices.Equal(t.Shape, e.Shape) {
			return rpc.Errorf(wire.InvalidArgument, "t has shape %v, e %v: they must have one shape", t.Shape, e.Shape)
		}
		if len(cond.Shape) == 0 {
			if cond.Data[0] != 0 {
				c.forward(0, t)
			} else {
				c.forward(0, e)
			}
			return nil
		}
		rows := slices.Equal(cond.Shape, t.Shape) || n.Op == "Select" && len(cond.Shape) == 1 && len(t.Shape) > 0 && cond.Shape[0] == t.Shape[0]
		if !rows {
			return rpc.Errorf(wire.Unimplemented, "condition of shape %v for t and e of shape %v: only a scalar, their shape or (Select) their first dimension is supported", cond.Shape, t.Shape)
		}
		count, _ := t.NumElements()
		block := int64(0)
		if len(cond.Data) > 0 {
			block = count / int64(len(cond.Data))
		}
		if dt == wire.DTString {
			return selectStrings(c, cond.Data, t, e, block)
		}
		r, err := tensor.New(dt, t.Shape)
		if err != nil {
			return err
		}
		size := block * int64(dt.Size())
		for i, b := range cond.Data {
			src := e
			if b != 0 {
				src = t
			}
			lo := int64(i) * size
			copy(r.Data[lo:lo+size], src.Data[lo:lo+size])
		}
		c.setOut(0, r)
		return nil
	}, nil
}

// selectStrings is Select of string tensors, block elements per condition.
func selectStrings(c *Context, cond []byte, t, e *wire.Tensor, block int64) error {
	te, err := t.Strings(nil)
	if err != nil {
		return rpc.Errorf(wire.InvalidArgument, "t: %v", err)
	}
	ee, err := e.Strings(nil)
	if err != nil {
		return rpc.Errorf(wire.InvalidArgument, "e: %v", err)
	}
	out := make([][]byte, 0, len(te))
	for i, b := range cond {
		src := ee
		if b != 0 {
			src = te
		}
		out = append(out, src[int64(i)*block:int64(i+1)*block]...)
	}
	c.setOut(0, newStrings(append([]int64(nil), t.Shape...), out))
	return nil
}

// buildPlaceholderWithDefault builds PlaceholderWithDefault(input): its
// input, unless fed. A fed one never reaches a kernel: the master turns a
// fed tensor into a _Recv of the feed.
func buildPlaceholderWithDefault(_ *Env, n *Node) (Kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	if _, err := n.attrType("dtype"); err != nil {
		return nil, err
	}
	n.NumOutputs = 1
	return func(c *Context) error {
		t, err := c.input(0)
		if err != nil {
			return err
		}
		c.forward(0, t)
		return nil
	}, nil
}
