package ops

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/starwire/starwire/rpc"
)

func TestCheckpointPathStaysInside(t *testing.T) {
	for prefix, want := range map[string]string{
		"model":             "/ckpt/model" + checkpointSuffix,
		"a/b/model-10":      "/ckpt/a/b/model-10" + checkpointSuffix,
		"../../etc/passwd":  "/ckpt/etc/passwd" + checkpointSuffix,
		"/abs/path/model":   "/ckpt/abs/path/model" + checkpointSuffix,
		"a/../../../escape": "/ckpt/escape" + checkpointSuffix,
	} {
		got, err := checkpointPath("/ckpt", prefix)
		if err != nil || got != want {
			t.Errorf("checkpointPath(%q) = %q, %v; want %q", prefix, got, err, want)
		}
	}
}

// FuzzReadCheckpoint feeds the checkpoint reader arbitrary files, seeded
// with one SaveV2 wrote; whatever it accepts must hold valid tensors.
func FuzzReadCheckpoint(f *testing.F) {
	seed, err := os.ReadFile("testdata/checkpoint-seed" + checkpointSuffix)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "c"+checkpointSuffix)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readCheckpoint(path)
		if err != nil {
			if !errors.Is(err, rpc.ErrDataLoss) {
				t.Fatalf("a bad file gave %v, want DataLoss", err)
			}
			return
		}
		for name, ts := range got {
			if err := ts.Check(); err != nil {
				t.Fatalf("tensor %q: %v", name, err)
			}
		}
	})
}
