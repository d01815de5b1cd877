package ops

import (
	"fmt"
	"regexp"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// StaticRegexFullMatch and RegexFullMatch: whether each string of a tensor
// matches a pattern in full. TensorFlow 2's checkpoint save function asks
// it of the file prefix ("^s3://.*") to choose where shards go first.
// Patterns are RE2, as TensorFlow's are, which Go's regexp implements.

func init() {
	registerOp("StaticRegexFullMatch", &Spec{Inputs: exactly(1), NumOutputs: exactly(1), Build: buildStaticRegexFullMatch})
	registerOp("RegexFullMatch", &Spec{Inputs: exactly(2), NumOutputs: exactly(1), Build: buildRegexFullMatch})
}

// compileFull compiles pattern to match whole strings only, as RE2's
// FullMatch does.
func compileFull(pattern string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

func buildStaticRegexFullMatch(_ *Env, n *Node) (Kernel, error) {
	pattern, err := n.attrString("pattern")
	if err != nil {
		return nil, err
	}
	re, err := compileFull(pattern)
	if err != nil {
		return nil, fmt.Errorf("attr \"pattern\": invalid pattern %q: %v", pattern, err)
	}
	return func(c *Context) error {
		in, err := c.typed(0, wire.DTString)
		if err != nil {
			return err
		}
		return fullMatch(c, re, in)
	}, nil
}

func buildRegexFullMatch(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		var in [2]*wire.Tensor
		if err := c.typedInputs(wire.DTString, in[:]); err != nil {
			return err
		}
		if len(in[1].Shape) != 0 {
			return status.Errorf(wire.InvalidArgument, "pattern must be a scalar, has shape %v", in[1].Shape)
		}
		p, err := stringElems(in[1])
		if err != nil {
			return err
		}
		re, err := compileFull(string(p[0]))
		if err != nil {
			return status.Errorf(wire.InvalidArgument, "invalid pattern %q: %v", p[0], err)
		}
		return fullMatch(c, re, in[0])
	}, nil
}

// fullMatch sets output 0 to whether each element of in matches re.
func fullMatch(c *Context, re *regexp.Regexp, in *wire.Tensor) error {
	elems, err := stringElems(in)
	if err != nil {
		return err
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
