package handlers

import (
	"log/slog"

	"github.com/starwire/starwire/handlers/compute"
	"github.com/starwire/starwire/wire/tfpb"
)

// A Resolver returns the Caller for a task named like
// "/job:ps/replica:0/task:0". A _Recv whose source device lives on another
// task pulls the tensor from it with RecvTensor through this Caller. The
// Worker may call it once per step and per remote _Recv, so it should return
// a cached client.
type Resolver func(task string) (Caller, error)

// Options configure a Worker. Job is required; the zero value of every other
// field means its default.
type Options struct {
	// Job and Task name the task: "/job:<Job>/replica:0/task:<Task>".
	Job  string
	Task int
	// Device is the task's one device; empty means
	// "/job:<Job>/replica:0/task:<Task>/device:CPU:0".
	Device string
	// Incarnation identifies this run of the task; rendezvous keys carry it,
	// so a restarted task refuses keys meant for its predecessor. Zero means
	// a random value.
	Incarnation uint64
	// MemoryLimit is reported by GetStatus; zero means 16 GiB.
	MemoryLimit int64
	// Resolver reaches other tasks for remote _Recv; nil means every _Recv
	// must be local.
	Resolver Resolver
	// Cluster, when set, is given the cluster of a CreateWorkerSession
	// that carries a ServerDef: the master's view of the tasks'
	// addresses, newer than the task's own when a peer restarted
	// elsewhere. Its error fails the call.
	Cluster func(*tfpb.ClusterDef) error
	// CheckpointDir is where SaveV2, RestoreV2 and MergeV2Checkpoints read
	// and write TensorFlow checkpoints: relative prefixes are taken under
	// it, absolute ones (as a TensorFlow master sends them) must lie inside
	// it. Empty disables them (FailedPrecondition).
	CheckpointDir string
	// StreamDir is where embedding variables' change stream is written
	// (ops.Env.StreamDir); empty disables it.
	StreamDir string
	// StreamKeep is how many versions of the change stream are kept
	// (ops.Env.StreamKeep); 0 keeps every one.
	StreamKeep int
	// Logger receives step failures; nil means slog.Default().
	Logger *slog.Logger
	// Compute bounds the op kernels that compute at once; tasks that share
	// a process should share one (compute.Process), so that their kernels
	// together leave a P free for the network. Nil means no bound.
	Compute *compute.Limit
}
