package train

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// ProbeCheckpointDir checks, before the first step, that every parameter
// server can save into dir as the model's checkpoints will: each saves a
// checkpoint of one scalar there with SaveV2, through the prefix checks
// and writes of every save, and the probe's files are removed after (dir
// must be visible here, as a Saver's state file needs). A task started
// without a checkpoint directory, with one that does not cover dir, or
// on a file system it cannot write fails the probe at once; the error
// names the first such task and why, where otherwise the run would be
// lost at its first save. The steps must not have started.
func (s *Session) ProbeCheckpointDir(ctx context.Context, dir string) error {
	tag := "starwire-probe-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(s.NextStepID(), 36)
	for i, ps := range s.tasks.PS {
		prefix := filepath.Join(dir, tag+"-"+strconv.Itoa(i))
		err := s.probeOne(ctx, ps, prefix)
		if err == nil {
			// A save that wrote nothing here writes where train cannot read.
			if _, serr := os.Stat(prefix + ".index"); serr != nil {
				err = fmt.Errorf("the probe's checkpoint is not in this process's view of the directory: %w", serr)
			}
		}
		if rerr := removeProbe(prefix); err == nil && rerr != nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("%s cannot save checkpoints in %s: %w", ps.Name, dir, err)
		}
	}
	return nil
}

// probeOne saves the probe's checkpoint at prefix on ps.
func (s *Session) probeOne(ctx context.Context, ps Task, prefix string) error {
	g, err := s.d.RegisterGraph(ctx, ps.Name, probeGraph(ps.Device, prefix))
	if err != nil {
		return err
	}
	defer s.d.Forget(ctx, g)
	step := s.NextStepID()
	err = s.d.RunPartitions(ctx, step, driver.Partition{Graph: g})
	return errors.Join(err, s.d.CleanupStep(ctx, step, ps.Name))
}

// removeProbe removes the files of the probe's checkpoint at prefix.
func removeProbe(prefix string) error {
	files, err := filepath.Glob(prefix + ".*")
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			errs = append(errs, fmt.Errorf("remove the probe's %s: %w", f, err))
		}
	}
	return errors.Join(errs...)
}

// probeGraph saves a scalar int64 named "probe" at prefix, on device.
func probeGraph(device, prefix string) *tfpb.GraphDef {
	str := func(v ...string) *tfpb.TensorProto {
		t := &tfpb.TensorProto{Dtype: tfpb.DataType(wire.DTString), TensorShape: tensor.ShapeToProto([]int64{int64(len(v))})}
		for _, x := range v {
			t.StringVal = append(t.StringVal, []byte(x))
		}
		return t
	}
	scalar := &tfpb.TensorProto{Dtype: tfpb.DataType(wire.DTString), TensorShape: &tfpb.TensorShapeProto{}, StringVal: [][]byte{[]byte(prefix)}}
	constant := func(name string, dt wire.DataType, t *tfpb.TensorProto) *tfpb.NodeDef {
		return &tfpb.NodeDef{Name: name, Op: "Const", Device: device, Attr: map[string]*tfpb.AttrValue{
			"dtype": {Value: &tfpb.AttrValue_Type{Type: tfpb.DataType(dt)}},
			"value": {Value: &tfpb.AttrValue_Tensor{Tensor: t}},
		}}
	}
	value := &tfpb.TensorProto{Dtype: tfpb.DataType(wire.DTInt64), TensorShape: &tfpb.TensorShapeProto{}, Int64Val: []int64{0}}
	return &tfpb.GraphDef{Node: []*tfpb.NodeDef{
		constant("probe/prefix", wire.DTString, scalar),
		constant("probe/tensor_names", wire.DTString, str("probe")),
		constant("probe/shape_and_slices", wire.DTString, str("")),
		constant("probe/value", wire.DTInt64, value),
		{Name: "probe/save", Op: "SaveV2", Device: device,
			Input: []string{"probe/prefix", "probe/tensor_names", "probe/shape_and_slices", "probe/value"},
			Attr:  map[string]*tfpb.AttrValue{"dtypes": {Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{Type: []tfpb.DataType{tfpb.DataType(wire.DTInt64)}}}}}},
	}}
}
