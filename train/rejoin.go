package train

import (
	"context"
	"fmt"
	"time"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
	"github.com/starwire/starwire/wire/tfpb"
)

// FindTimeout bounds one attempt of PeerRejoiner.Find to reach a task.
const FindTimeout = time.Second

// A PeerRejoiner finds a training job's lost tasks again: at the address
// its driver's Peers call now (the cluster spec's), or, with Lookup, at
// the one Lookup gives now (a registry entry, which a task restarted on
// port 0 changes). Once a task answers it points the Peers and the driver
// at it.
type PeerRejoiner struct {
	Peers  *tasks.Peers
	Driver *driver.Driver
	// Jobs are the jobs of the model's tasks, sent in ServerDef.
	Jobs []string
	// Lookup, when set, reads a task's addresses again.
	Lookup func(task string) (tasks.Addrs, error)
}

// Find tries once to reach task, and points the driver's Caller at it
// once it answers; addr is the gRPC address tried.
func (j *PeerRejoiner) Find(ctx context.Context, task string) (addr string, err error) {
	addrs, err := j.Peers.Addrs(task)
	if err != nil {
		return "", err
	}
	if j.Lookup != nil {
		if addrs, err = j.Lookup(task); err != nil {
			return "", err
		}
	}
	layout := j.Peers.Layout()
	opts, err := layout.GRPCDialOptions()
	if err != nil {
		return addrs.GRPC, err
	}
	c, err := handlers.DialGRPC(task, addrs.GRPC, opts...)
	if err != nil {
		return addrs.GRPC, err
	}
	sctx, cancel := context.WithTimeout(ctx, FindTimeout)
	_, err = c.GetStatus(sctx)
	cancel()
	c.Close()
	if err != nil {
		return addrs.GRPC, fmt.Errorf("at %s: %s", addrs.GRPC, tasks.ShortError(err))
	}
	// A new Caller, at the same address too: the old one's connection
	// is broken and it would wait out its backoff.
	if _, err := j.Peers.Repoint(task, addrs); err != nil {
		return addrs.GRPC, err
	}
	nc, err := j.Peers.Caller(task)
	if err != nil {
		return addrs.GRPC, err
	}
	return addrs.GRPC, j.Driver.Replace(nc)
}

// ServerDef returns the model's tasks at the addresses the driver calls
// now, for the sessions created again after a task moved.
func (j *PeerRejoiner) ServerDef() *tfpb.ServerDef {
	layout := j.Peers.Layout()
	def := &tfpb.ServerDef{Cluster: &tfpb.ClusterDef{}, Protocol: string(layout.Protocol)}
	for _, job := range j.Jobs {
		jd := &tfpb.JobDef{Name: job, Tasks: map[int32]string{}}
		for _, i := range layout.Cluster.TaskIndices(job) {
			if a, err := j.Peers.Addrs(cluster.TaskName(job, i)); err == nil {
				jd.Tasks[int32(i)] = a.GRPC
			}
		}
		def.Cluster.Job = append(def.Cluster.Job, jd)
	}
	return def
}
