package ops

func init() {
	registerOp("PlaceholderWithDefault", &Spec{Inputs: exactly(1), Types: []TypeAttr{anyType("dtype")}, NumOutputs: exactly(1), Build: buildPlaceholderWithDefault})
}

// buildPlaceholderWithDefault builds PlaceholderWithDefault(input): its
// input, unless fed. TensorFlow's Saver graphs hold the checkpoint prefix
// in one. A fed one never reaches a kernel: the master turns a fed tensor
// into a _Recv of the feed.
func buildPlaceholderWithDefault(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		t, err := c.input(0)
		if err != nil {
			return err
		}
		c.forward(0, t)
		return nil
	}, nil
}
