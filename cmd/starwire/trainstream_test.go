package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/embedding/changes"
	"github.com/starwire/starwire/handlers/tensor"
)

// TestTrainStream trains the hash embedding on two ps tasks with
// evictions at its saves and the change stream on: the tables a follower
// replays are the rows the final checkpoint holds, id for id and value
// for value.
func TestTrainStream(t *testing.T) {
	ckpt, stream := t.TempDir(), t.TempDir()
	code, out, errOut := runMain(t, "train", "--embedding", "hash", "--ps", "2", "--values", "2000", "--steps", "150", "--seed", "3",
		"--held_out", "256", "--afxdp", "off", "--steps_to_live", "40", "--checkpoint_dir", ckpt, "--save_checkpoint_steps", "60",
		"--stream_dir", stream, "--stream_every", "25")
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "exported the change stream to global step") {
		t.Fatalf("train does not say it exported the stream:\n%s", out)
	}
	f := changes.NewFollower(stream)
	applied, err := f.Poll()
	if err != nil {
		t.Fatal(err)
	}
	evicted := 0
	for _, a := range applied {
		for _, ta := range a.Tables {
			evicted += ta.Removed
		}
	}
	t.Logf("%d versions, %d rows evicted", len(applied), evicted)
	if len(applied) < 5 || evicted == 0 {
		t.Fatalf("%d versions and %d evictions: the stream was not exercised", len(applied), evicted)
	}
	prefix, err := checkpoint.Latest(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	r, err := checkpoint.Open(prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for s := range 2 {
		name := fmt.Sprintf("embedding/part_%d", s)
		keys, err := r.Read(name + "-keys")
		if err != nil {
			t.Fatal(err)
		}
		values, err := r.Read(name + "-values")
		if err != nil {
			t.Fatal(err)
		}
		tab := f.Table(name)
		if tab == nil {
			t.Fatalf("the stream has no table %s: %v", name, f.Tables())
		}
		ids, want := tensor.View[int64](keys.Data), tensor.View[float32](values.Data)
		got := make([]float32, len(want))
		if err := tab.Find(ids, got); err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 || tab.Len() != len(ids) {
			t.Fatalf("%s: the follower has %d rows, the checkpoint %d", name, tab.Len(), len(ids))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: id %d's value %d: follower %v, checkpoint %v", name, ids[i/(len(want)/len(ids))], i, got[i], want[i])
			}
		}
	}
}
