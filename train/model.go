package train

import (
	"context"
	"slices"
	"sync"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/wire/tfpb"
)

// A Model is what a Session trains: graphs on the tasks of a
// parameter-server cluster (jobs "ps" and "worker"), run through the
// session's driver. Replica r's steps run on worker r's graphs while that
// worker answers, and on another live worker's when it is lost.
type Model interface {
	// Build registers the model's graphs for t, through t.Register: every
	// parameter server's, and those of each live worker's replica (a lost
	// worker's replica gets none). It replaces the graphs of the last
	// Build, which the session deregisters once Build succeeds, and which
	// the model must no longer run; on error the session deregisters the
	// graphs this Build registered and the last Build's stay.
	Build(ctx context.Context, t *Tasks) error
	// Initialize sets the parameter servers' variables to their initial
	// values, with step ids from the session (Session.NextStepID).
	Initialize(ctx context.Context) error
	// Replica returns replica r's source of training steps.
	Replica(r int) Replica
}

// A Binder is a Model that uses the session training it: its step ids
// (Initialize's, Step's), its global step, its live replicas. NewSession
// gives it the session before returning, so that no Setup, Build or
// Initialize runs before the model has it.
type Binder interface {
	Bind(s *Session)
}

// A KeepingInitializer is a Model whose Initialize leaves a variable a
// parameter server has already initialized as it is (DeepRec's
// embedding variables, made once and kept on a second initialization):
// after a restart with no checkpoint to restore, only the servers that
// restarted start afresh, and the others keep their values.
type KeepingInitializer interface {
	InitializeKeeps() bool
}

// A Replica runs one replica's training steps, one at a time: Next, then
// Step, for each.
type Replica interface {
	// Next readies the next step's input (its batch). It runs outside the
	// session's step gate, so that a recovery does not wait for it.
	Next(ctx context.Context) error
	// Step runs one training step on the input Next readied, with step id
	// step, over worker on's graphs, and returns its loss. A step that
	// fails has used its input.
	Step(ctx context.Context, on int, step int64) (loss float64, err error)
	// Close releases what the replica holds.
	Close()
}

// A Task is one task of a model as a Build sees it.
type Task struct {
	// Name is the task's name, "/job:ps/replica:0/task:0", and Device its
	// CPU device.
	Name, Device string
	// Incarnation is the task's, which its rendezvous keys carry.
	Incarnation uint64
	// Live is false for a worker known lost: its replica gets no graphs.
	Live bool
}

// Tasks are the tasks a Build is for, and the graphs registered for
// them. Safe for concurrent use.
type Tasks struct {
	PS, Workers []Task
	d           *driver.Driver

	mu     sync.Mutex
	graphs []driver.Graph
}

// Register registers def on task: the graph lives until a later Build
// replaces these tasks. A model registers through it the graphs it makes
// after Build too (a Saver's, the first time it saves).
func (t *Tasks) Register(ctx context.Context, task string, def *tfpb.GraphDef) (driver.Graph, error) {
	g, err := t.d.RegisterGraph(ctx, task, def)
	if err != nil {
		return g, err
	}
	t.mu.Lock()
	t.graphs = append(t.graphs, g)
	t.mu.Unlock()
	return g, nil
}

// PSNames returns the parameter servers' task names.
func (t *Tasks) PSNames() []string {
	out := make([]string, len(t.PS))
	for i, p := range t.PS {
		out[i] = p.Name
	}
	return out
}

// take returns the graphs registered for t and forgets them.
func (t *Tasks) take() []driver.Graph {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := slices.Clone(t.graphs)
	t.graphs = nil
	return g
}

// restarted returns the names of the tasks of now whose incarnation is
// not the one in before, the same tasks' incarnations then.
func restarted(now []Task, before []uint64) []string {
	var out []string
	for i, t := range now {
		if i >= len(before) || t.Incarnation != before[i] {
			out = append(out, t.Name)
		}
	}
	return out
}

// incarnations returns the incarnations of tasks.
func incarnations(tasks []Task) []uint64 {
	out := make([]uint64, len(tasks))
	for i, t := range tasks {
		out[i] = t.Incarnation
	}
	return out
}
