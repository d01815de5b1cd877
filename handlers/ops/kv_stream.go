package ops

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"

	"github.com/starwire/starwire/handlers/embedding/changes"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	registerOp("KvResourceStreamExport", &Spec{Defaults: map[string]*tfpb.AttrValue{
		"dtype": typeAttr(wire.DTFloat), "steps_in_flight": intAttr(0),
	}, Inputs: exactly(2), Types: kvStepTypes, NumOutputs: exactly(1), Build: buildKvResourceStreamExport})
}

// streamWriters are the change streams of this process, one writer per
// directory: the tasks of one process that share a directory share its
// stream. A process that starts again opens a new writer, which goes on
// after the newest version with a base (package changes).
var streamWriters = struct {
	sync.Mutex
	m map[string]*changes.Writer
}{m: map[string]*changes.Writer{}}

// streamWriter returns the writer into dir, opening it on first use,
// keeping keep versions (the first opener's keep).
func streamWriter(dir string, keep int) (*changes.Writer, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, status.Errorf(wire.Internal, "stream directory %s: %v", dir, err)
	}
	streamWriters.Lock()
	defer streamWriters.Unlock()
	if w := streamWriters.m[root]; w != nil {
		return w, nil
	}
	w, err := changes.NewWriterWithOptions(root, changes.WriterOptions{Keep: keep})
	if err != nil {
		return nil, status.Errorf(wire.Internal, "%v", err)
	}
	streamWriters.m[root] = w
	return w, nil
}

// buildKvResourceStreamExport builds KvResourceStreamExport(resource,
// global_step) -> version: the next version of the change stream in the
// task's stream directory (serve --stream_dir), holding the rows of the
// embedding variable's table updated since the previous version and the
// ids evicted (package changes), with those of every variable exported
// there before, and keeps the newest serve --stream_keep versions; the
// output is the version written, 0 when nothing changed or when another
// task of the process exported at the same global step, writing this
// variable's changes with its own (one version per round of exports).
// Updates still in flight may be up to steps_in_flight older than
// global_step; they go in the next version. It is starwire's op.
func buildKvResourceStreamExport(env *Env, n *Node) (Kernel, error) {
	keyType, stepType := n.typeOf("Tkeys"), n.typeOf("Tstep")
	inFlight, err := n.attrInt("steps_in_flight")
	if err != nil {
		return nil, err
	}
	if inFlight < 0 {
		return nil, status.Errorf(wire.InvalidArgument, "steps_in_flight must be >= 0, is %d", inFlight)
	}
	return func(c *Context) error {
		if env.StreamDir == "" {
			return status.Errorf(wire.FailedPrecondition, "KvResourceStreamExport: the task has no stream directory (serve --stream_dir)")
		}
		v, err := c.kvVarKeyed(0, keyType)
		if err != nil {
			return err
		}
		step, err := c.globalStep(1, stepType)
		if err != nil {
			return err
		}
		t, slot, err := v.kvTable()
		if err != nil {
			return err
		}
		if slot >= 0 {
			return status.Errorf(wire.InvalidArgument, "embedding variable %s is a slot; export its primary", v.name)
		}
		w, err := streamWriter(env.StreamDir, env.StreamKeep)
		if err != nil {
			return err
		}
		w.Track(strings.TrimPrefix(v.name, "/"), t)
		gs, _ := indices(step)
		m, err := w.Export(gs[0] - inFlight)
		if errors.Is(err, changes.ErrExists) {
			return status.Errorf(wire.FailedPrecondition, "embedding variable %s: %v (two processes export into one stream directory)", v.name, err)
		} else if err != nil { // m, when set, was written, and its elders not removed
			return status.Errorf(wire.Internal, "embedding variable %s: %v", v.name, err)
		}
		out, err := tensor.New(wire.DTInt64, nil)
		if err != nil {
			return err
		}
		var version int64
		if m != nil {
			version = m.Version
		}
		tensor.View[int64](out.Data)[0] = version
		c.setOut(0, out)
		return nil
	}, nil
}
