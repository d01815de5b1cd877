package handlers

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"

	"github.com/starwire/starwire/handlers/graph"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/wire/tfpb"
)

// A Worker is one task's WorkerService state: its device, sessions,
// registered graphs, variables and the rendezvous of the steps it runs.
// Serve it over starwire with Register and over gRPC with GRPCService; both
// share the same state. Safe for concurrent use.
type Worker struct {
	opts   Options
	task   string
	device rendezvous.DeviceName
	attrs  *tfpb.DeviceAttributes
	log    *slog.Logger

	rendezvous *rendezvous.Rendezvous
	vars       *ops.Variables
	env        *ops.Env // what the graphs' kernels reach
	stats      *stepStatsLog
	collective *collectives

	mu       sync.Mutex
	sessions map[string]*session
	graphs   map[string]*registered // by handle
	nextID   uint64
}

// registered is a graph registered under a handle.
type registered struct {
	*graph.Graph
	session string
}

// NewWorker returns the worker of the task opts names.
func NewWorker(opts Options) (*Worker, error) {
	if opts.Job == "" {
		return nil, fmt.Errorf("handlers: new worker: empty job name")
	}
	if opts.Task < 0 {
		return nil, fmt.Errorf("handlers: new worker: negative task %d", opts.Task)
	}
	if opts.Device == "" {
		opts.Device = "/job:" + opts.Job + "/replica:0/task:" + strconv.Itoa(opts.Task) + "/device:CPU:0"
	}
	dev, err := rendezvous.ParseDevice(opts.Device)
	if err != nil {
		return nil, fmt.Errorf("handlers: new worker: %w", err)
	}
	if dev.Job != opts.Job || dev.Task != opts.Task {
		return nil, fmt.Errorf("handlers: new worker: device %q is not on /job:%s/task:%d", opts.Device, opts.Job, opts.Task)
	}
	for opts.Incarnation == 0 {
		var b [8]byte
		rand.Read(b[:])
		opts.Incarnation = binary.LittleEndian.Uint64(b[:])
	}
	if opts.MemoryLimit <= 0 {
		opts.MemoryLimit = 16 << 30
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w := &Worker{
		opts:   opts,
		task:   dev.TaskName(),
		device: dev,
		attrs: &tfpb.DeviceAttributes{
			Name:        dev.String(),
			DeviceType:  dev.Type,
			MemoryLimit: opts.MemoryLimit,
			Incarnation: opts.Incarnation,
			Locality:    &tfpb.DeviceLocality{},
		},
		log:        opts.Logger,
		rendezvous: rendezvous.New(),
		vars:       ops.NewVariables(),
		stats:      newStepStatsLog(),
		collective: newCollectives(),
		sessions:   make(map[string]*session),
		graphs:     make(map[string]*registered),
	}
	host, _ := os.Hostname()
	w.env = &ops.Env{Task: w.task, Rendezvous: w.rendezvous, Vars: w.vars, CheckpointDir: opts.CheckpointDir, StreamDir: opts.StreamDir, StreamKeep: opts.StreamKeep, Host: host, Compute: opts.Compute}
	if opts.Resolver != nil {
		w.env.RemoteRecv = w.remoteRecv
	}
	return w, nil
}

// Task returns the worker's task name, "/job:ps/replica:0/task:0".
func (w *Worker) Task() string { return w.task }

// Device returns the worker's device name, in canonical form.
func (w *Worker) Device() string { return w.attrs.Name }

// Incarnation returns the worker's incarnation, the number its rendezvous
// keys carry.
func (w *Worker) Incarnation() uint64 { return w.opts.Incarnation }

// Rendezvous returns the worker's rendezvous.
func (w *Worker) Rendezvous() *rendezvous.Rendezvous { return w.rendezvous }
