package ops

// DisableCopyOnRead turns off a resource variable's copy-on-read mode,
// which TensorFlow 2's checkpoint save function asks before reading each
// variable. Variables here have no such mode (a read copies under the
// variable's locks), so it only checks that its input is a variable.

func init() {
	registerOp("DisableCopyOnRead", &Spec{Inputs: exactly(1), NumOutputs: exactly(0), Build: buildDisableCopyOnRead})
}

func buildDisableCopyOnRead(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		_, err := c.resource(0)
		return err
	}, nil
}
