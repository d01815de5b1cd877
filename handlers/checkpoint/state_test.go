package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/starwire/starwire/wire"
)

// A state file as Python's text_format writes it.
const pythonState = `model_checkpoint_path: "model.ckpt-20"
all_model_checkpoint_paths: "model.ckpt-10"
all_model_checkpoint_paths: "model.ckpt-20"
all_model_checkpoint_timestamps: 1700000000.25
all_model_checkpoint_timestamps: 1700000100.5
last_preserved_timestamp: 1699999999.0
`

func TestReadStateAndLatest(t *testing.T) {
	dir := t.TempDir()
	if _, err := Latest(dir); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Latest of an empty dir: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, StateFile), []byte(pythonState), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.ModelCheckpointPath != "model.ckpt-20" || !slices.Equal(st.AllModelCheckpointPaths, []string{"model.ckpt-10", "model.ckpt-20"}) {
		t.Errorf("state %+v", st)
	}
	if p, err := Latest(dir); p != "" || !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Latest naming a missing checkpoint: %q, %v", p, err)
	}
	save(t, filepath.Join(dir, "model.ckpt-20"), nil, nil)
	if p, err := Latest(dir); err != nil || p != filepath.Join(dir, "model.ckpt-20") {
		t.Errorf("Latest = %q, %v", p, err)
	}
	os.WriteFile(filepath.Join(dir, StateFile), []byte("model_checkpoint_path: [oops"), 0o644)
	if _, err := ReadState(dir); !errors.Is(err, ErrCorrupt) {
		t.Errorf("garbled state: %v", err)
	}
}

func TestKeep(t *testing.T) {
	dir := t.TempDir()
	v := map[string]*wire.Tensor{"v": randTensor(wire.DTFloat, []int64{1}, 1)}
	for step := 1; step <= 5; step++ {
		prefix := filepath.Join(dir, fmt.Sprintf("model.ckpt-%d", step))
		save(t, prefix, []string{"v"}, v)
		if err := Keep(dir, prefix, 3); err != nil {
			t.Fatal(err)
		}
	}
	st, err := ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"model.ckpt-3", "model.ckpt-4", "model.ckpt-5"}
	if st.ModelCheckpointPath != "model.ckpt-5" || !slices.Equal(st.AllModelCheckpointPaths, want) {
		t.Errorf("state %+v, want newest 5 and %v", st, want)
	}
	for step := 1; step <= 5; step++ {
		_, err := os.Stat(IndexFile(filepath.Join(dir, fmt.Sprintf("model.ckpt-%d", step))))
		_, derr := os.Stat(DataFile(filepath.Join(dir, fmt.Sprintf("model.ckpt-%d", step)), 0, 1))
		if kept := step >= 3; kept != (err == nil) || kept != (derr == nil) {
			t.Errorf("step %d: index %v, data %v, want kept=%v", step, err, derr, kept)
		}
	}
	// Re-recording the newest does not duplicate it; a Python file's
	// timestamps are carried along; odd names survive quoting.
	if err := os.WriteFile(filepath.Join(dir, StateFile), []byte(pythonState), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Keep(dir, "bad\xff", 0); !errors.Is(err, ErrMismatch) {
		t.Errorf("Keep of a non-UTF-8 name: %v", err)
	}
	odd := "model \"q\"\n\\ckpt\u00e9"
	if err := Keep(dir, odd, 0); err != nil {
		t.Fatal(err)
	}
	if err := Keep(dir, filepath.Join(dir, odd), 0); err != nil {
		t.Fatal(err)
	}
	st, err = ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.AllModelCheckpointPaths, []string{"model.ckpt-10", "model.ckpt-20", odd}) || st.ModelCheckpointPath != odd {
		t.Errorf("state %+v", st)
	}
	raw, _ := readState(dir)
	if len(raw.AllModelCheckpointTimestamps) != 3 || raw.AllModelCheckpointTimestamps[0] != 1700000000.25 || raw.LastPreservedTimestamp != 1699999999 {
		t.Errorf("timestamps %v, last preserved %v", raw.AllModelCheckpointTimestamps, raw.LastPreservedTimestamp)
	}
}

// The errors of a missing index or state name the checkpoint once and the
// file the system could not open once.
func TestMissingNamedOnce(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "model.ckpt-1")
	_, err := Open(prefix)
	want := "checkpoint " + prefix + ": open " + prefix + ".index: no such file or directory: checkpoint: not found"
	if err == nil || err.Error() != want || !errors.Is(err, ErrNotFound) {
		t.Errorf("Open: %v\nwant %s", err, want)
	}
	_, err = Latest(dir)
	want = "checkpoint state: open " + filepath.Join(dir, StateFile) + ": no such file or directory: checkpoint: no checkpoint"
	if err == nil || err.Error() != want || !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("Latest: %v\nwant %s", err, want)
	}
}
