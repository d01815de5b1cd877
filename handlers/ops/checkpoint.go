package ops

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

func init() {
	registerOp("SaveV2", &Spec{Build: buildSaveV2})
	registerOp("RestoreV2", &Spec{Build: buildRestoreV2})
}

// Checkpoint files hold named tensors:
//
//	magic "SWCKPT1\n" | uvarint count | count × entry | crc32c (LE) of all before
//	entry: uvarint name length | name | uvarint dtype | uvarint rank |
//	       rank × uvarint dim | uvarint byte length | bytes
//
// A save writes a temporary file, syncs it and renames it over the old one,
// so a task that dies mid-save leaves the previous checkpoint intact.
const (
	checkpointMagic  = "SWCKPT1\n"
	checkpointSuffix = ".swckpt"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkpointPath maps a SaveV2/RestoreV2 prefix into the checkpoint
// directory dir; prefixes cannot climb out of it.
func checkpointPath(dir, prefix string) (string, error) {
	if dir == "" {
		return "", rpc.Errorf(wire.FailedPrecondition, "the worker has no checkpoint directory")
	}
	if prefix == "" {
		return "", rpc.Errorf(wire.InvalidArgument, "empty checkpoint prefix")
	}
	return filepath.Join(dir, filepath.Clean("/"+prefix)) + checkpointSuffix, nil
}

// namesAndSlices returns the n elements of the string vector names;
// slices must be empty, since partitioned variables are not supported.
func namesAndSlices(names, slices *wire.Tensor, n int) ([][]byte, error) {
	if names.DType != wire.DTString || len(names.Shape) != 1 || names.Shape[0] != int64(n) {
		return nil, rpc.Errorf(wire.InvalidArgument, "tensor_names must be %d strings, is %v%v", n, names.DType, names.Shape)
	}
	out, err := names.Strings(nil)
	if err != nil {
		return nil, rpc.Errorf(wire.InvalidArgument, "tensor_names: %v", err)
	}
	if slices.DType != wire.DTString || len(slices.Shape) != 1 || slices.Shape[0] != int64(n) {
		return nil, rpc.Errorf(wire.InvalidArgument, "shape_and_slices must be %d strings, is %v%v", n, slices.DType, slices.Shape)
	}
	sl, err := slices.Strings(nil)
	if err != nil {
		return nil, rpc.Errorf(wire.InvalidArgument, "shape_and_slices: %v", err)
	}
	for i, s := range sl {
		if len(s) != 0 {
			return nil, rpc.Errorf(wire.Unimplemented, "slice %q of %q: partitioned variables are not supported", s, out[i])
		}
	}
	return out, nil
}

// A checkpointTarget is what SaveV2 and RestoreV2 read from their first
// three inputs: prefix, tensor_names and shape_and_slices.
type checkpointTarget struct {
	prefix string   // as given, for messages
	path   string   // the file prefix names in the checkpoint directory
	names  [][]byte // one per entry of dtypes
}

// resolveCheckpoint reads ts, the first three inputs of SaveV2 or RestoreV2,
// for n tensors in the checkpoint directory dir. Both ops check them alike,
// so that a prefix saves and restores the same file.
func resolveCheckpoint(dir string, ts []*wire.Tensor, n int) (checkpointTarget, error) {
	prefix, err := scalarString(ts[0], "prefix")
	if err != nil {
		return checkpointTarget{}, fmt.Errorf("prefix: %w", err)
	}
	names, err := namesAndSlices(ts[1], ts[2], n)
	if err != nil {
		return checkpointTarget{}, err
	}
	path, err := checkpointPath(dir, prefix)
	if err != nil {
		return checkpointTarget{}, err
	}
	return checkpointTarget{prefix: prefix, path: path, names: names}, nil
}

func buildSaveV2(env *Env, n *Node) (Kernel, error) {
	dtypes, err := n.attrTypeList("dtypes")
	if err != nil {
		return nil, err
	}
	if err := n.wantInputs(3 + len(dtypes)); err != nil {
		return nil, err
	}
	return func(c *Context) error {
		ts := make([]*wire.Tensor, 3+len(dtypes))
		if err := c.inputs(ts); err != nil {
			return err
		}
		target, err := resolveCheckpoint(env.CheckpointDir, ts[:3], len(dtypes))
		if err != nil {
			return err
		}
		b := []byte(checkpointMagic)
		b = binary.AppendUvarint(b, uint64(len(target.names)))
		for i, name := range target.names {
			t := ts[3+i]
			if t.DType != dtypes[i] {
				return rpc.Errorf(wire.InvalidArgument, "tensor %q is %v, dtypes says %v", name, t.DType, dtypes[i])
			}
			b = binary.AppendUvarint(b, uint64(len(name)))
			b = append(b, name...)
			b = binary.AppendUvarint(b, uint64(t.DType))
			b = binary.AppendUvarint(b, uint64(len(t.Shape)))
			for _, d := range t.Shape {
				b = binary.AppendUvarint(b, uint64(d))
			}
			b = binary.AppendUvarint(b, uint64(len(t.Data)))
			b = append(b, t.Data...)
		}
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
		return writeFileAtomic(target.path, b)
	}, nil
}

// writeFileAtomic writes b to a temporary file beside path, syncs it and
// renames it to path.
func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return rpc.Errorf(wire.Internal, "checkpoint: %v", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return rpc.Errorf(wire.Internal, "checkpoint: %v", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return rpc.Errorf(wire.Internal, "checkpoint %s: %v", path, err)
	}
	return nil
}

// readCheckpoint parses a checkpoint file into views of its bytes.
func readCheckpoint(path string) (map[string]wire.Tensor, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, rpc.Errorf(wire.NotFound, "checkpoint %s does not exist", filepath.Base(path))
	}
	if err != nil {
		return nil, rpc.Errorf(wire.Internal, "checkpoint: %v", err)
	}
	corrupt := func(what string) error {
		return rpc.Errorf(wire.DataLoss, "checkpoint %s is corrupt: %s", filepath.Base(path), what)
	}
	if len(b) < len(checkpointMagic)+4 || !bytes.HasPrefix(b, []byte(checkpointMagic)) {
		return nil, corrupt("bad magic")
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, corrupt("checksum mismatch")
	}
	r := body[len(checkpointMagic):]
	next := func() (uint64, bool) {
		v, n := binary.Uvarint(r)
		if n <= 0 {
			return 0, false
		}
		r = r[n:]
		return v, true
	}
	count, ok := next()
	if !ok || count > uint64(len(r)) {
		return nil, corrupt("bad count")
	}
	out := make(map[string]wire.Tensor, count)
	for i := uint64(0); i < count; i++ {
		nl, ok := next()
		if !ok || nl > uint64(len(r)) {
			return nil, corrupt("bad name")
		}
		name := string(r[:nl])
		r = r[nl:]
		dt, ok1 := next()
		rank, ok2 := next()
		if !ok1 || !ok2 || rank > wire.MaxRank {
			return nil, corrupt("bad descriptor of " + name)
		}
		shape := make([]int64, rank)
		for j := range shape {
			d, ok := next()
			if !ok || d > 1<<40 {
				return nil, corrupt("bad shape of " + name)
			}
			shape[j] = int64(d)
		}
		nb, ok := next()
		if !ok || nb > uint64(len(r)) {
			return nil, corrupt("bad length of " + name)
		}
		t := wire.Tensor{DType: wire.DataType(dt), Shape: shape, Data: r[:nb]}
		if err := t.Check(); err != nil {
			return nil, corrupt(fmt.Sprintf("%s: %v", name, err))
		}
		r = r[nb:]
		out[name] = t
	}
	if len(r) != 0 {
		return nil, corrupt("trailing bytes")
	}
	return out, nil
}

func buildRestoreV2(env *Env, n *Node) (Kernel, error) {
	dtypes, err := n.attrTypeList("dtypes")
	if err != nil {
		return nil, err
	}
	if err := n.wantInputs(3); err != nil {
		return nil, err
	}
	n.NumOutputs = len(dtypes)
	return func(c *Context) error {
		var ts [3]*wire.Tensor
		if err := c.inputs(ts[:]); err != nil {
			return err
		}
		target, err := resolveCheckpoint(env.CheckpointDir, ts[:], len(dtypes))
		if err != nil {
			return err
		}
		saved, err := readCheckpoint(target.path)
		if err != nil {
			return err
		}
		for i, name := range target.names {
			t, ok := saved[string(name)]
			if !ok {
				return rpc.Errorf(wire.NotFound, "tensor %q is not in checkpoint %s", name, target.prefix)
			}
			if t.DType != dtypes[i] {
				return rpc.Errorf(wire.InvalidArgument, "tensor %q is %v in checkpoint %s, dtypes says %v", name, t.DType, target.prefix, dtypes[i])
			}
			c.setOut(i, tensor.Copy(&t))
		}
		return nil
	}, nil
}
