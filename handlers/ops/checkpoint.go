package ops

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/embedding"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// SaveV2, RestoreV2 and MergeV2Checkpoints read and write TensorFlow's own
// checkpoint format (package checkpoint), so that a checkpoint a starwire
// ps saves is one TensorFlow restores, and the other way round. Their
// prefixes lie in the checkpoint directory (see resolvePrefix).

func init() {
	// prefix, tensor_names and shape_and_slices, then a tensor per dtype.
	registerOp("SaveV2", &Spec{
		Defaults: map[string]*tfpb.AttrValue{"has_ev": boolAttr(false), "ev_key_types": {Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{}}}},
		Inputs:   byList("dtypes").plus(3), NumOutputs: exactly(0), Build: buildSaveV2,
	})
	registerOp("RestoreV2", &Spec{Inputs: exactly(3), NumOutputs: byList("dtypes"), Build: buildRestoreV2})
	registerOp("MergeV2Checkpoints", &Spec{
		Defaults: map[string]*tfpb.AttrValue{"delete_old_dirs": boolAttr(true), "allow_missing_files": boolAttr(false)},
		Inputs:   exactly(2), NumOutputs: exactly(0), Build: buildMergeV2Checkpoints,
	})
}

// checkpointError gives an error of package checkpoint TensorFlow's code
// for it, naming the prefix as the graph gave it where the error does not
// name the checkpoint's path already: NotFound for a missing
// checkpoint or tensor, DataLoss for a corrupt one, InvalidArgument for a
// dtype, shape or slice that does not fit.
func checkpointError(prefix string, err error) error {
	code := wire.Internal
	switch {
	case errors.Is(err, checkpoint.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		code = wire.NotFound
	case errors.Is(err, checkpoint.ErrCorrupt):
		code = wire.DataLoss
	case errors.Is(err, checkpoint.ErrMismatch):
		code = wire.InvalidArgument
	case errors.Is(err, fs.ErrPermission):
		code = wire.PermissionDenied
	}
	if msg := err.Error(); strings.HasPrefix(msg, "checkpoint "+string(filepath.Separator)) {
		// Package checkpoint named the checkpoint, by the absolute path
		// prefix resolves to (a TensorFlow master sends that path itself):
		// named again, it would read "checkpoint /c/m: checkpoint /c/m: ...".
		return status.Errorf(code, "%s", msg)
	}
	return status.Errorf(code, "checkpoint %s: %v", prefix, err)
}

// A checkpointTarget is what SaveV2 and RestoreV2 read from their first
// three inputs: prefix, tensor_names and shape_and_slices.
type checkpointTarget struct {
	prefix string   // as given, for messages
	path   string   // where prefix lies in the checkpoint directory
	names  [][]byte // one per entry of dtypes
	specs  [][]byte // the shape_and_slices, "" for a whole tensor
}

// resolveCheckpoint reads ts, the first three inputs of SaveV2 or
// RestoreV2, for n tensors in the checkpoint directory root.
func resolveCheckpoint(root string, ts []*wire.Tensor, n int) (checkpointTarget, error) {
	prefix, err := scalarString(ts[0], "prefix")
	if err != nil {
		return checkpointTarget{}, err
	}
	path, err := resolvePrefix(root, prefix)
	if err != nil {
		return checkpointTarget{}, err
	}
	target := checkpointTarget{prefix: prefix, path: path}
	if target.names, err = stringVector(ts[1], n, "tensor_names"); err != nil {
		return checkpointTarget{}, err
	}
	if target.specs, err = stringVector(ts[2], n, "shape_and_slices"); err != nil {
		return checkpointTarget{}, err
	}
	return target, nil
}

// stringVector returns the n elements of the string vector t.
func stringVector(t *wire.Tensor, n int, what string) ([][]byte, error) {
	if t.DType != wire.DTString || len(t.Shape) != 1 || t.Shape[0] != int64(n) {
		return nil, status.Errorf(wire.InvalidArgument, "%s must be %d strings, is %v%v", what, n, t.DType, t.Shape)
	}
	out, err := t.Strings(nil)
	if err != nil {
		return nil, status.Errorf(wire.InvalidArgument, "%s: %v", what, err)
	}
	return out, nil
}

// parseSpec parses tensor name's shape_and_slices entry.
func (c *checkpointTarget) parseSpec(i int) (full []int64, s checkpoint.Slice, err error) {
	full, s, err = checkpoint.ParseShapeAndSlice(string(c.specs[i]))
	if err != nil {
		return nil, s, status.Errorf(wire.InvalidArgument, "checkpoint %s: tensor %q: %v", c.prefix, c.names[i], err) // err names the spec
	}
	return full, s, nil
}

// buildSaveV2 builds SaveV2(prefix, tensor_names, shape_and_slices,
// tensors...): one checkpoint, in one data file, under prefix. A tensor
// with a shape_and_slices spec is that slice of a partitioned variable,
// saved so that a restore may read any slice of the whole. A tensor of
// dtype resource is an embedding variable's handle, saved as DeepRec's
// SaveV2 saves it (kv_checkpoint.go); with has_ev, tensor 0 is the global
// step, and the variables' rows past steps_to_live or below their L2
// threshold are evicted before they are saved.
func buildSaveV2(env *Env, n *Node) (Kernel, error) {
	dtypes := n.typesOf("dtypes")
	hasEV, err := n.attrBool("has_ev")
	if err != nil {
		return nil, err
	}
	root, err := checkpointRoot(env.CheckpointDir)
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		ts, err := saveInputs(c, 3, dtypes)
		if err != nil {
			return err
		}
		target, err := resolveCheckpoint(root, ts[:3], len(dtypes))
		if err != nil {
			return err
		}
		step, haveStep := saveStep(hasEV, ts[3:])
		return writeSave(c, &target, dtypes, ts, 3, func(w *checkpoint.Writer, kv map[*embedding.Table]*kvSaved, name string, res resource) error {
			return saveKv(w, kv, target.prefix, name, res, step, haveStep)
		})
	}, nil
}

// saveInputs reads a save's first n inputs (prefix, tensor names, shapes
// and slices, and the op's own) and then its tensors, of dtypes, but for
// those of dtype resource, whose variables the kernel reads from c.In.
func saveInputs(c *Context, n int, dtypes []wire.DataType) ([]*wire.Tensor, error) {
	ts := make([]*wire.Tensor, n+len(dtypes))
	if err := c.inputs(ts[:n]); err != nil {
		return nil, err
	}
	for i, dt := range dtypes {
		if dt == wire.DTResource {
			continue
		}
		var err error
		if ts[n+i], err = c.input(n + i); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// writeSave writes target's tensors, ts[first:], into a new checkpoint:
// those of dtype resource, embedding variables, through kv, the others
// in full.
func writeSave(c *Context, target *checkpointTarget, dtypes []wire.DataType, ts []*wire.Tensor, first int,
	kv func(w *checkpoint.Writer, cache map[*embedding.Table]*kvSaved, name string, res resource) error) error {
	w, err := checkpoint.NewWriter(target.path, 0, 1)
	if err != nil {
		return checkpointError(target.prefix, err)
	}
	defer w.Abort()
	cache := map[*embedding.Table]*kvSaved{}
	for i, name := range target.names {
		if dtypes[i] == wire.DTResource {
			if err := kv(w, cache, string(name), c.In[first+i].res); err != nil {
				return err
			}
			continue
		}
		if err := saveOne(w, target, i, ts[first+i], dtypes[i]); err != nil {
			return err
		}
	}
	if err := w.Finish(); err != nil {
		return checkpointError(target.prefix, err)
	}
	return nil
}

// saveStep returns the global step a SaveV2 with has_ev gives as its
// tensor 0.
func saveStep(hasEV bool, ts []*wire.Tensor) (int64, bool) {
	if !hasEV || len(ts) == 0 || ts[0] == nil || len(ts[0].Shape) != 0 {
		return 0, false
	}
	v, err := indices(ts[0])
	if err != nil || len(v) != 1 {
		return 0, false
	}
	return v[0], true
}

// saveOne adds tensor i of target, t, to w.
func saveOne(w *checkpoint.Writer, target *checkpointTarget, i int, t *wire.Tensor, dt wire.DataType) error {
	name := target.names[i]
	if t.DType != dt {
		return status.Errorf(wire.InvalidArgument, "checkpoint %s: tensor %q is %v, dtypes says %v", target.prefix, name, t.DType, dt)
	}
	full, s, err := target.parseSpec(i)
	if err != nil {
		return err
	}
	if full == nil {
		err = w.Add(string(name), t)
	} else {
		err = w.AddSlice(string(name), full, s, t)
	}
	if err != nil {
		return checkpointError(target.prefix, err)
	}
	return nil
}

// buildRestoreV2 builds RestoreV2(prefix, tensor_names,
// shape_and_slices): the tensors, or with a spec the slices of them, from
// the checkpoint under prefix, whichever slices they were saved in (a
// variable saved by N ps tasks restores into M).
func buildRestoreV2(env *Env, n *Node) (Kernel, error) {
	dtypes := n.typesOf("dtypes")
	root, err := checkpointRoot(env.CheckpointDir)
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		var ts [3]*wire.Tensor
		if err := c.inputs(ts[:]); err != nil {
			return err
		}
		target, err := resolveCheckpoint(root, ts[:], len(dtypes))
		if err != nil {
			return err
		}
		r, err := checkpoint.Open(target.path)
		if err != nil {
			return checkpointError(target.prefix, err)
		}
		defer r.Close()
		for i := range target.names {
			t, err := restoreOne(r, &target, i, dtypes[i])
			if err != nil {
				return err
			}
			c.setOut(i, t)
		}
		return nil
	}, nil
}

// restoreOne reads tensor i of target from r as a tensor of dtype dt in
// a buffer of its own.
func restoreOne(r *checkpoint.Reader, target *checkpointTarget, i int, dt wire.DataType) (wire.Tensor, error) {
	name := string(target.names[i])
	e, ok := r.Entry(name)
	if !ok {
		return wire.Tensor{}, status.Errorf(wire.NotFound, "checkpoint %s: tensor %q is not in the checkpoint", target.prefix, name)
	}
	if e.DType != dt {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "checkpoint %s: tensor %q is %v in the checkpoint, dtypes says %v", target.prefix, name, e.DType, dt)
	}
	full, s, err := target.parseSpec(i)
	if err != nil {
		return wire.Tensor{}, err
	}
	if full != nil && !slices.Equal(full, e.Shape) {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "checkpoint %s: tensor %q is %v in the checkpoint, shape_and_slices %q says %v", target.prefix, name, e.Shape, target.specs[i], full)
	}
	t, err := r.ReadSlice(name, s)
	if err != nil {
		return wire.Tensor{}, checkpointError(target.prefix, err)
	}
	// The reader's memory is the garbage collector's; a step's outputs are
	// pooled and aligned for any view of them.
	return tensor.Copy(&t), nil
}

// buildMergeV2Checkpoints builds MergeV2Checkpoints(checkpoint_prefixes,
// destination_prefix): the shards a sharded save wrote, one per ps task,
// joined into one checkpoint under destination_prefix, their files moved
// or deleted. With delete_old_dirs (the default, as a Saver's graph has
// it) the shards' directories are removed once empty, as TensorFlow
// removes "<prefix>_temp"; with allow_missing_files a shard that is not
// there is skipped rather than refused.
func buildMergeV2Checkpoints(env *Env, n *Node) (Kernel, error) {
	deleteOld, err := n.attrBool("delete_old_dirs")
	if err != nil {
		return nil, err
	}
	allowMissing, err := n.attrBool("allow_missing_files")
	if err != nil {
		return nil, err
	}
	root, err := checkpointRoot(env.CheckpointDir)
	if err != nil {
		return nil, err
	}
	return func(c *Context) error {
		var in [2]*wire.Tensor
		if err := c.inputs(in[:]); err != nil {
			return err
		}
		p := in[0]
		if p.DType != wire.DTString || len(p.Shape) != 1 {
			return status.Errorf(wire.InvalidArgument, "checkpoint_prefixes must be a string vector, is %v%v", p.DType, p.Shape)
		}
		prefixes, err := p.Strings(nil)
		if err != nil {
			return status.Errorf(wire.InvalidArgument, "checkpoint_prefixes: %v", err)
		}
		dst, err := scalarString(in[1], "destination_prefix")
		if err != nil {
			return err
		}
		dstPath, err := resolvePrefix(root, dst)
		if err != nil {
			return err
		}
		src := make([]string, 0, len(prefixes))
		for _, prefix := range prefixes {
			path, err := resolvePrefix(root, string(prefix))
			if err != nil {
				return err
			}
			if allowMissing {
				if _, err := os.Stat(checkpoint.IndexFile(path)); errors.Is(err, fs.ErrNotExist) {
					continue
				}
			}
			src = append(src, path)
		}
		if len(src) == 0 {
			return status.Errorf(wire.NotFound, "checkpoint %s: none of the %d checkpoints to merge exists", dst, len(prefixes))
		}
		if err := checkpoint.Merge(src, dstPath, deleteOld); err != nil {
			return checkpointError(dst, err)
		}
		return nil
	}, nil
}
