package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/lr"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
	"github.com/starwire/starwire/wire/tfpb"
)

// A rejoiner finds a training job's lost tasks again: at their address
// in the cluster spec, or, with --registry_dir, at the one their
// registration gives now, which a restarted task (on port 0) changes.
type rejoiner struct {
	r     *trainRun
	set   map[string]bool // the flags given
	peers *tasks.Peers    // the driver's
	d     *driver.Driver
}

// findTimeout bounds one attempt to reach a task.
const findTimeout = time.Second

// Find implements lr.Rejoiner.
func (j *rejoiner) Find(ctx context.Context, task string) (string, error) {
	addrs, err := j.peers.Addrs(task)
	if err != nil {
		return "", err
	}
	if j.r.f.RegistryDir != "" {
		if addrs, err = j.registered(task); err != nil {
			return "", err
		}
	}
	opts, err := j.r.layout.GRPCDialOptions()
	if err != nil {
		return addrs.GRPC, err
	}
	c, err := driver.DialGRPC(task, addrs.GRPC, opts...)
	if err != nil {
		return addrs.GRPC, err
	}
	sctx, cancel := context.WithTimeout(ctx, findTimeout)
	_, err = c.GetStatus(sctx)
	cancel()
	c.Close()
	if err != nil {
		return addrs.GRPC, fmt.Errorf("at %s: %s", addrs.GRPC, tasks.ShortError(err))
	}
	// A new Caller, at the same address too: the old one's connection
	// is broken and it would wait out its backoff.
	if _, err := j.peers.Repoint(task, addrs); err != nil {
		return addrs.GRPC, err
	}
	nc, err := j.peers.Caller(task)
	if err != nil {
		return addrs.GRPC, err
	}
	return addrs.GRPC, j.d.Replace(nc)
}

// registered reads task's registration again.
func (j *rejoiner) registered(task string) (tasks.Addrs, error) {
	job, idx, err := cluster.ParseTaskName(task)
	if err != nil {
		return tasks.Addrs{}, err
	}
	return registeredAddrs(j.r.f.RegistryDir, job, idx, j.r.layout.Protocol)
}

// registeredAddrs reads the addresses task idx of job registered in dir.
func registeredAddrs(dir, job string, idx int, p cluster.Protocol) (tasks.Addrs, error) {
	m, err := cluster.Lookup(dir, job, idx)
	if err != nil {
		return tasks.Addrs{}, err
	}
	a := tasks.Addrs{GRPC: m[cluster.AddrGRPC], Star: m[cluster.AddrStar]}
	if a.GRPC == "" || (p.UsesStar() && a.Star == "") {
		return tasks.Addrs{}, fmt.Errorf("%s registered in %s without its addresses", cluster.TaskName(job, idx), dir)
	}
	if !p.UsesStar() {
		a.Star = ""
	}
	return a, nil
}

// ServerDef implements lr.Rejoiner: the model's tasks at the addresses
// the driver calls now.
func (j *rejoiner) ServerDef() *tfpb.ServerDef {
	def := &tfpb.ServerDef{Cluster: &tfpb.ClusterDef{}, Protocol: string(j.r.layout.Protocol)}
	for _, job := range modelJobs {
		jd := &tfpb.JobDef{Name: job, Tasks: map[int32]string{}}
		for _, i := range j.r.layout.Cluster.TaskIndices(job) {
			if a, err := j.peers.Addrs(cluster.TaskName(job, i)); err == nil {
				jd.Tasks[int32(i)] = a.GRPC
			}
		}
		def.Cluster.Job = append(def.Cluster.Job, jd)
	}
	return def
}

// recover has job recover from lost tasks as --on_failure recover says:
// restoring from --checkpoint_dir's newest checkpoint when there is one.
func (r *trainRun) recover(job *lr.Job, j *rejoiner, saver **saver, stdout io.Writer) {
	f := r.f
	o := lr.RecoverOptions{
		Rejoin:  j,
		Timeout: f.recoveryTimeout,
		Log: func(msg string) {
			if w, ok := strings.CutPrefix(msg, "warning: "); ok {
				if f.ckpt.dir == "" {
					w += " (give --checkpoint_dir to keep it)"
				}
				fmt.Fprintf(os.Stderr, "starwire: train: warning: %s\n", w)
				return
			}
			fmt.Fprintf(stdout, "recovery: %s\n", msg)
		},
	}
	if f.ckpt.dir != "" {
		o.Restore = func(ctx context.Context) (int64, error) {
			step, prefix, err := job.Restore(ctx, f.ckpt.dir)
			if err != nil {
				return 0, err
			}
			fmt.Fprintf(stdout, "recovery: restored every ps from %s (global step %d)\n", filepath.Base(prefix), step)
			if s := *saver; s != nil {
				s.restored(step)
			}
			return step, nil
		}
	}
	job.RecoverTasks(o)
}

// restored makes the saver count its interval from a restored step.
func (s *saver) restored(step int64) {
	s.mu.Lock()
	s.lastStep, s.lastAt = step, s.now()
	s.mu.Unlock()
}
