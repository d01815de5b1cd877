package ops

func init() {
	registerOp("PlaceholderWithDefault", &Spec{Build: buildPlaceholderWithDefault})
}

// buildPlaceholderWithDefault builds PlaceholderWithDefault(input): its
// input, unless fed. TensorFlow's Saver graphs hold the checkpoint prefix
// in one. A fed one never reaches a kernel: the master turns a fed tensor
// into a _Recv of the feed.
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
