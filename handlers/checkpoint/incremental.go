package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Incremental checkpoints (saved by the ps's IncrSave, between full
// ones) lie beside the full checkpoints they build on, where TensorFlow's
// readers do not look: under IncrementalDir, a directory per full
// checkpoint named after its prefix's base name, each with a state file
// of its own (StateFile, the same CheckpointState) listing its increments
// oldest first. The directory's own state file names full checkpoints
// alone, so tf.train.latest_checkpoint and a Saver's restore see those
// and nothing else. An increment is deleted with the full checkpoint it
// builds on (PruneIncrements).

// IncrementalDir is the directory, in a checkpoint directory, that holds
// the increments; the name is DeepRec's.
const IncrementalDir = ".incremental_checkpoint"

// IncrementBasename is an increment prefix's base name, followed by
// "-<global step>".
const IncrementBasename = "incr-model.ckpt"

// IncrementsDir is the directory of the increments of the full
// checkpoint base (a prefix) in dir.
func IncrementsDir(dir, base string) string {
	return filepath.Join(dir, IncrementalDir, filepath.Base(base))
}

// AddIncrement records the increment under prefix (saved in
// IncrementsDir(dir, base)) as the newest of base's, after those before.
func AddIncrement(dir, base, prefix string) error {
	return Keep(IncrementsDir(dir, base), prefix, 0)
}

// Increments returns the prefixes of the increments of the full
// checkpoint base in dir, oldest first: none when it has none. An
// increment its state names whose files are gone is ErrNotFound, as a
// restore that skipped it would lose its rows.
func Increments(dir, base string) ([]string, error) {
	d := IncrementsDir(dir, base)
	st, err := ReadState(d)
	if errors.Is(err, ErrNoCheckpoint) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, len(st.AllModelCheckpointPaths))
	for i, p := range st.AllModelCheckpointPaths {
		out[i] = resolve(d, p)
		if _, err := os.Stat(IndexFile(out[i])); err != nil {
			return nil, fmt.Errorf("increment %s named by %s: %w: %w", out[i], filepath.Join(d, StateFile), err, ErrNotFound)
		}
	}
	return out, nil
}

// PruneIncrements deletes the increments of every full checkpoint dir's
// state no longer lists: those Keep dropped.
func PruneIncrements(dir string) error {
	st, err := ReadState(dir)
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, p := range append(st.AllModelCheckpointPaths, st.ModelCheckpointPath) {
		kept[filepath.Base(p)] = true
	}
	root := filepath.Join(dir, IncrementalDir)
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("increments %s: %w", root, err)
	}
	for _, e := range ents {
		if e.IsDir() && !kept[e.Name()] {
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				return fmt.Errorf("increments %s: %w", root, err)
			}
		}
	}
	return nil
}
