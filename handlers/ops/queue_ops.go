package ops

import (
	"fmt"
	"slices"
	"strings"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// The ops of FIFO queues (queue.go), as core/ops/data_flow_ops.cc defines
// them, with TensorFlow's errors: those that may wait are Async.

func init() {
	noShapes := &tfpb.AttrValue{Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{}}}
	registerOp("FIFOQueueV2", resourceSpec(map[string]*tfpb.AttrValue{"shapes": noShapes, "capacity": intAttr(-1), "container": stringAttr(""), "shared_name": stringAttr("")},
		[]TypeAttr{listOf(storable("component_types"), 1)}, buildFIFOQueue))
	timeout := map[string]*tfpb.AttrValue{"timeout_ms": intAttr(-1)}
	// The handle, then the components.
	enqueue := byList("Tcomponents").plus(1)
	registerOp("QueueEnqueueV2", &Spec{Defaults: timeout, Async: true, Inputs: enqueue, NumOutputs: exactly(0), Build: buildEnqueue(false)})
	registerOp("QueueEnqueueManyV2", &Spec{Defaults: timeout, Async: true, Inputs: enqueue, NumOutputs: exactly(0), Build: buildEnqueue(true)})
	dequeue := byList("component_types")
	registerOp("QueueDequeueV2", &Spec{Defaults: timeout, Async: true, Inputs: exactly(1), NumOutputs: dequeue, Build: buildDequeue(false)})
	registerOp("QueueDequeueManyV2", &Spec{Defaults: timeout, Async: true, Inputs: exactly(2), NumOutputs: dequeue, Build: buildDequeue(true)})
	registerOp("QueueCloseV2", &Spec{Defaults: map[string]*tfpb.AttrValue{"cancel_pending_enqueues": boolAttr(false)}, Async: true,
		Inputs: exactly(1), NumOutputs: exactly(0), Build: buildQueueClose})
	registerOp("QueueSizeV2", &Spec{Inputs: exactly(1), NumOutputs: exactly(1), Build: buildQueueSize})
}

const queueWhat = "a queue"

func buildFIFOQueue(env *Env, n *Node) (Kernel, error) {
	dtypes := n.typesOf("component_types")
	shapes, err := queueShapes(n, len(dtypes))
	if err != nil {
		return nil, err
	}
	capacity, err := n.attrInt("capacity")
	if err != nil {
		return nil, err
	}
	want := newFIFOQueue("", int(capacity), dtypes, shapes)
	create := func(name string) resource { return newFIFOQueue(name, int(capacity), dtypes, shapes) }
	check := func(r resource) error { return want.matches(r) }
	op, err := newResourceOp(env, n, queueKind, wire.DTResource, create, check)
	if err != nil {
		return nil, err
	}
	return op.kernel, nil
}

// queueShapes reads the shapes attribute: none, or one fully defined
// shape per component.
func queueShapes(n *Node, components int) ([][]int64, error) {
	a, err := attrValue[*tfpb.AttrValue_List](n, "shapes", "a list")
	if err != nil {
		return nil, err
	}
	list := a.List.GetShape()
	if len(list) != 0 && len(list) != components {
		return nil, fmt.Errorf("has %d component types and %d shapes", components, len(list))
	}
	var shapes [][]int64
	for _, s := range list {
		dims := partialShape(s)
		if dims == nil || slices.Contains(dims, -1) {
			return nil, fmt.Errorf("queue shape %s is not fully defined", shapeString(dims))
		}
		shapes = append(shapes, dims)
	}
	return shapes, nil
}

// matches refuses a shared queue r that a node with q's attributes would
// not have made, in TensorFlow's words.
func (q *fifoQueue) matches(r resource) error {
	o, ok := r.(*fifoQueue)
	if !ok {
		return status.Errorf(wire.InvalidArgument, "shared resource %s is not a FIFOQueue", r.resourceName())
	}
	switch {
	case o.capacity != q.capacity:
		return status.Errorf(wire.InvalidArgument, "Shared queue '%s' has capacity %d but requested capacity was %d", o.name, o.capacity, q.capacity)
	case !slices.Equal(o.dtypes, q.dtypes):
		return status.Errorf(wire.InvalidArgument, "Shared queue '%s' has component types %s but requested component types were %s", o.name, typesString(o.dtypes), typesString(q.dtypes))
	case !slices.EqualFunc(o.shapes, q.shapes, slices.Equal):
		return status.Errorf(wire.InvalidArgument, "Shared queue '%s' has component shapes %s but requested component shapes were %s", o.name, shapesString(o.shapes), shapesString(q.shapes))
	}
	return nil
}

func typesString(dts []wire.DataType) string {
	s := make([]string, len(dts))
	for i, dt := range dts {
		s[i] = dt.String()
	}
	return strings.Join(s, ", ")
}

func shapesString(shapes [][]int64) string {
	s := make([]string, len(shapes))
	for i, sh := range shapes {
		s[i] = shapeString(sh)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// queueOf returns the queue of input 0.
func queueOf(c *Context) (*fifoQueue, error) {
	return inputResource[*fifoQueue](c, 0, queueWhat)
}

// manyComponents refuses string components for the ops of many elements,
// which slice and stack fixed-size elements only.
func manyComponents(dtypes []wire.DataType) error {
	if slices.Contains(dtypes, wire.DTString) {
		return status.Errorf(wire.Unimplemented, "enqueue or dequeue of many string elements is not supported")
	}
	return nil
}

func buildEnqueue(many bool) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dtypes := n.typesOf("Tcomponents")
		if many {
			if err := manyComponents(dtypes); err != nil {
				return nil, err
			}
		}
		return func(c *Context) error {
			q, err := queueOf(c)
			if err != nil {
				return err
			}
			if !slices.Equal(dtypes, q.dtypes) {
				return status.Errorf(wire.InvalidArgument, "Signature mismatch, have: resource, %s-> expected: resource, %s->", typesString(dtypes), typesString(q.dtypes))
			}
			tuple := make([]wire.Tensor, len(dtypes))
			for i := range tuple {
				t, err := c.input(1 + i)
				if err != nil {
					return err
				}
				tuple[i] = *t
			}
			at := &queueAttempt{kind: enqueueOne}
			if many {
				if err := q.checkBatch(tuple); err != nil {
					return err
				}
				at.kind, at.n = enqueueMany, int(tuple[0].Shape[0])
				if at.n == 0 {
					return nil
				}
			} else if err := q.checkElement(tuple); err != nil {
				return err
			}
			for i := range tuple {
				tuple[i] = tensor.Ref(tuple[i])
			}
			at.tuple = tuple
			_, err = q.wait(c.Ctx, at, "Enqueue operation was cancelled")
			return err
		}, nil
	}
}

// checkElement checks an element's shapes against the queue's.
func (q *fifoQueue) checkElement(tuple []wire.Tensor) error {
	for i := range q.shapes {
		if !slices.Equal(q.shapes[i], tuple[i].Shape) {
			return status.Errorf(wire.InvalidArgument, "Shape mismatch in tuple component %d. Expected %s, got %s", i, shapeString(q.shapes[i]), shapeString(tuple[i].Shape))
		}
	}
	return nil
}

// checkBatch checks a batch of elements: every component has the batch
// as its first dimension, and the rest is the queue's shape.
func (q *fifoQueue) checkBatch(tuple []wire.Tensor) error {
	for i := range tuple {
		if len(tuple[i].Shape) == 0 {
			return status.Errorf(wire.InvalidArgument, "Expected component %d of an enqueue of many to have rank >= 1, got shape %s", i, shapeString(tuple[i].Shape))
		}
	}
	batch := tuple[0].Shape[0]
	for i := range tuple {
		if len(q.shapes) > 0 {
			if want := append([]int64{batch}, q.shapes[i]...); !slices.Equal(want, tuple[i].Shape) {
				return status.Errorf(wire.InvalidArgument, "Shape mismatch in tuple component %d. Expected %s, got %s", i, shapeString(want), shapeString(tuple[i].Shape))
			}
		} else if tuple[i].Shape[0] != batch {
			return status.Errorf(wire.InvalidArgument, "All input tensors must have the same size in the 0th dimension. Component %d has %d, and should have %d", i, tuple[i].Shape[0], batch)
		}
	}
	return nil
}

func buildDequeue(many bool) func(*Env, *Node) (Kernel, error) {
	return func(_ *Env, n *Node) (Kernel, error) {
		dtypes, arg := n.typesOf("component_types"), "resource"
		if many {
			arg = "resource, int32"
			if err := manyComponents(dtypes); err != nil {
				return nil, err
			}
		}
		return func(c *Context) error {
			q, err := queueOf(c)
			if err != nil {
				return err
			}
			at := &queueAttempt{kind: dequeueOne}
			if many {
				if at.n, err = dequeueCount(c); err != nil {
					return err
				}
				at.kind = dequeueMany
			}
			if !slices.Equal(dtypes, q.dtypes) {
				return status.Errorf(wire.InvalidArgument, "Signature mismatch, have: %s->%s expected: %s->%s", arg, typesString(dtypes), arg, typesString(q.dtypes))
			}
			if many && len(q.shapes) == 0 {
				return status.Errorf(wire.InvalidArgument, "FIFOQueue's DequeueMany and DequeueUpTo require the components to have specified shapes.")
			}
			if many && at.n == 0 {
				return q.dequeueNone(c)
			}
			out, err := q.wait(c.Ctx, at, "Dequeue operation was cancelled")
			if err != nil {
				return err
			}
			for i := range out {
				c.setOut(i, out[i])
			}
			return nil
		}, nil
	}
}

// dequeueCount reads a dequeue of many's n.
func dequeueCount(c *Context) (int, error) {
	nt, err := c.typed(1, wire.DTInt32)
	if err != nil {
		return 0, err
	}
	if len(nt.Data) < 4 {
		return 0, status.Errorf(wire.InvalidArgument, "n must be an int32 scalar, has shape %s", shapeString(nt.Shape))
	}
	n := int(tensor.View[int32](nt.Data)[0])
	if n < 0 {
		return 0, status.Errorf(wire.InvalidArgument, "DequeueManyOp requested %d < 0 elements", n)
	}
	return n, nil
}

// dequeueNone answers a dequeue of no elements at once, with empty
// outputs, as TensorFlow does, even from a closed queue.
func (q *fifoQueue) dequeueNone(c *Context) error {
	out, err := q.batchOf(nil)
	if err != nil {
		return err
	}
	for i := range out {
		c.setOut(i, out[i])
	}
	return nil
}

func buildQueueClose(_ *Env, n *Node) (Kernel, error) {
	cancel, err := n.attrBool("cancel_pending_enqueues")
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		q, err := queueOf(c)
		if err != nil {
			return err
		}
		return q.close(c.Ctx, cancel)
	}, nil
}

func buildQueueSize(*Env, *Node) (Kernel, error) {
	return func(c *Context) error {
		q, err := queueOf(c)
		if err != nil {
			return err
		}
		r, _ := tensor.New(wire.DTInt32, nil)
		tensor.View[int32](r.Data)[0] = int32(q.size())
		c.setOut(0, r)
		return nil
	}, nil
}
