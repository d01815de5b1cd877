package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/wire"
)

// tfCheckpoint was written by TensorFlow: a = 0.5, b = 3.0, c = 3.0.
const tfCheckpoint = "../../handlers/checkpoint/testdata/tf-half-plus-three/variables"

func runCapture(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckpointInspect(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		code int
		out  string
		err  string
	}{
		{"list", []string{tfCheckpoint}, 0,
			"a (DT_FLOAT) []\nb (DT_FLOAT) []\nc (DT_FLOAT) []\n\n# Total number of params: 3\n", ""},
		{"all", []string{tfCheckpoint, "--all"}, 0,
			"tensor_name:  a\n0.5\ntensor_name:  b\n3.0\ntensor_name:  c\n3.0\n# Total number of params: 3\n", ""},
		{"tensor first", []string{"--tensor", "a", tfCheckpoint}, 0,
			"tensor_name:  a\n0.5\n# Total number of params: 3\n", ""},
		{"missing tensor", []string{tfCheckpoint, "--tensor", "zz"}, 1, "", `tensor "zz" not found`},
		{"missing checkpoint", []string{"testdata/none"}, 1, "", "testdata/none.index"},
		{"no prefix", nil, 2, "", "give the checkpoint's PREFIX"},
		{"two prefixes", []string{tfCheckpoint, tfCheckpoint}, 2, "", "unexpected argument"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCapture(append([]string{"checkpoint", "inspect"}, c.args...)...)
			if code != c.code || (c.code == 0 && out != c.out) || !strings.Contains(errs, c.err) {
				t.Errorf("exit %d, stdout:\n%s\nstderr: %s\nwant exit %d, stdout:\n%s\nstderr with %q", code, out, errs, c.code, c.out, c.err)
			}
		})
	}
	if code, _, errs := runCapture("checkpoint", "frob"); code != 2 || !strings.Contains(errs, `unknown subcommand "frob"`) {
		t.Errorf("checkpoint frob: exit %d, %s", code, errs)
	}
}

// TestCheckpointInspectNames: the checkpoint may be named as TensorFlow's
// tools take it: its prefix, its index or data file, or the directory,
// whose "checkpoint" file names the newest; a directory without one says
// so.
func TestCheckpointInspectNames(t *testing.T) {
	dir := t.TempDir()
	for _, ext := range []string{".index", ".data-00000-of-00001"} {
		b, err := os.ReadFile(tfCheckpoint + ext)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "model.ckpt-5"+ext), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state := "model_checkpoint_path: \"model.ckpt-5\"\nall_model_checkpoint_paths: \"model.ckpt-5\"\n"
	if err := os.WriteFile(filepath.Join(dir, checkpoint.StateFile), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	const want = "a (DT_FLOAT) []\nb (DT_FLOAT) []\nc (DT_FLOAT) []\n\n# Total number of params: 3\n"
	for _, arg := range []string{
		filepath.Join(dir, "model.ckpt-5"),
		filepath.Join(dir, "model.ckpt-5.index"),
		filepath.Join(dir, "model.ckpt-5.data-00000-of-00001"),
		dir,
		tfCheckpoint + ".index",
	} {
		if code, out, errs := runCapture("checkpoint", "inspect", arg); code != 0 || out != want {
			t.Errorf("inspect %s: exit %d, stdout:\n%s\nstderr: %s", arg, code, out, errs)
		}
	}
	empty := t.TempDir()
	if code, _, errs := runCapture("checkpoint", "inspect", empty); code != 1 || !strings.Contains(errs, "is a directory") || !strings.Contains(errs, checkpoint.StateFile) {
		t.Errorf("inspect of a directory without a checkpoint file: exit %d, %s", code, errs)
	}
}

// TestCheckpointInspectValues prints arrays of several types.
func TestCheckpointInspectValues(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "ckpt")
	w, err := checkpoint.NewWriter(prefix, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	f32 := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40, 0, 0, 0xa0, 0x40, 0, 0, 0xc0, 0x3f}
	for _, a := range []struct {
		name string
		t    wire.Tensor
	}{
		{"m", wire.Tensor{DType: wire.DTFloat, Shape: []int64{2, 3}, Data: f32}},
		{"i", wire.Tensor{DType: wire.DTInt64, Shape: []int64{2}, Data: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 7, 0, 0, 0, 0, 0, 0, 0}}},
		{"s", wire.Tensor{DType: wire.DTString, Shape: []int64{2}, Data: wire.AppendStrings(nil, [][]byte{[]byte("it's"), {0}})}},
		{"b", wire.Tensor{DType: wire.DTBool, Shape: []int64{}, Data: []byte{1}}},
	} {
		if err := w.Add(a.name, &a.t); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCapture("checkpoint", "inspect", "--all", prefix)
	want := "tensor_name:  b\nTrue\ntensor_name:  i\n[-1 7]\ntensor_name:  m\n[[1. 2. 3.]\n [4. 5. 1.5]]\n" +
		"tensor_name:  s\n[b'it\\'s' b'\\x00']\n# Total number of params: 11\n"
	if code != 0 || out != want {
		t.Errorf("exit %d (%s), stdout:\n%s\nwant:\n%s", code, errs, out, want)
	}
}

// TestCheckpointInspectMissing: a checkpoint that is not there is one
// line under "starwire: checkpoint inspect:", naming what the user gave,
// the index looked for, and the directory when it is missing too; so is
// a tensor the checkpoint lacks.
func TestCheckpointInspectMissing(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ arg, want string }{
		{filepath.Join(dir, "model.ckpt-5.data-00000-of-00001"), "starwire: checkpoint inspect: no checkpoint at " + filepath.Join(dir, "model.ckpt-5.data-00000-of-00001") +
			": its index " + filepath.Join(dir, "model.ckpt-5.index") + " does not exist (give a checkpoint's PREFIX, one of its files, or a directory whose \"checkpoint\" file names one)"},
		{filepath.Join(dir, "gone", "model.ckpt-5"), "starwire: checkpoint inspect: no checkpoint at " + filepath.Join(dir, "gone", "model.ckpt-5") +
			": its index " + filepath.Join(dir, "gone", "model.ckpt-5.index") + " does not exist, nor does the directory " + filepath.Join(dir, "gone") + " ("},
	} {
		code, out, errs := runCapture("checkpoint", "inspect", c.arg)
		if code != 1 || out != "" || !strings.HasPrefix(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("inspect %s: exit %d, stdout %q, stderr:\n%s\nwant exit 1, one line starting\n%s", c.arg, code, out, errs, c.want)
		}
	}
	code, _, errs := runCapture("checkpoint", "inspect", tfCheckpoint, "--tensor", "zz")
	if want := `starwire: checkpoint inspect: tensor "zz" not found in checkpoint ` + tfCheckpoint; code != 1 || !strings.HasPrefix(errs, want) {
		t.Errorf("inspect --tensor zz: exit %d, stderr %q, want it to start %q", code, errs, want)
	}
}
