package ops

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// checkpointRoot returns the absolute form of the checkpoint directory
// dir, which the prefixes of a graph's checkpoint ops must lie in. It is
// computed once per kernel, at build time, so that a relative directory
// means the same place for the graph's life.
func checkpointRoot(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return "", status.Errorf(wire.Internal, "checkpoint directory %s: %v", dir, err)
	}
	return root, nil
}

// resolvePrefix maps a checkpoint prefix, as a graph's SaveV2, RestoreV2
// or MergeV2Checkpoints names it, to a path under the checkpoint
// directory root (see checkpointRoot). A relative prefix is joined under
// root; an absolute one is taken as it is when it lies inside root, since
// a TensorFlow master sends the path its client gave ("/ckpt/model.ckpt",
// "/ckpt/model.ckpt_temp/part-00000-of-00002"). Anything that lands
// outside root, absolute or climbing out with "..", is refused: a graph
// may not make the task write or read files the operator did not give it.
// (Symbolic links inside root are followed: root is the operator's.)
//
// A prefix names files ("<prefix>.index", "<prefix>.data-..."), so root
// itself is no prefix: its files would land beside it.
func resolvePrefix(root, prefix string) (string, error) {
	if root == "" {
		return "", status.Errorf(wire.FailedPrecondition, "checkpoint %s: the task has no checkpoint directory; start it with --checkpoint_dir", prefix)
	}
	if prefix == "" {
		return "", status.Errorf(wire.InvalidArgument, "empty checkpoint prefix")
	}
	if strings.IndexByte(prefix, 0) >= 0 {
		return "", status.Errorf(wire.InvalidArgument, "checkpoint prefix %q holds a NUL byte", prefix)
	}
	path := filepath.Clean(prefix)
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(os.PathSeparator)) {
		return "", status.Errorf(wire.PermissionDenied, "checkpoint prefix %s lies outside the checkpoint directory %s", prefix, root)
	}
	return path, nil
}
