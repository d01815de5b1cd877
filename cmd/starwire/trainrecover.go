package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
	"github.com/starwire/starwire/train"
)

// rejoiner finds the job's lost tasks again: at their address in the
// cluster spec, or, with --registry_dir, at the one their registration
// gives now, which a restarted task (on port 0) changes.
func (r *trainRun) rejoiner(peers *tasks.Peers, d *driver.Driver) *train.PeerRejoiner {
	j := &train.PeerRejoiner{Peers: peers, Driver: d, Jobs: modelJobs}
	if dir := r.f.RegistryDir; dir != "" {
		j.Lookup = func(task string) (tasks.Addrs, error) {
			job, idx, err := cluster.ParseTaskName(task)
			if err != nil {
				return tasks.Addrs{}, err
			}
			return registeredAddrs(dir, job, idx, r.layout.Protocol)
		}
	}
	return j
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

// recover has job recover from lost tasks as --on_failure recover says:
// restoring from --checkpoint_dir's newest checkpoint when there is one.
func (r *trainRun) recover(job *trainJob, j train.Rejoiner, saver **train.CheckpointSaverHook, stdout io.Writer) {
	f := r.f
	o := train.RecoverOptions{
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
			restore := func(ctx context.Context) (int64, string, error) { return job.Restore(ctx, f.ckpt.dir) }
			if s := *saver; s != nil {
				restore = s.Restore // the full checkpoint and its increments
			}
			step, prefix, err := restore(ctx)
			if err != nil {
				return 0, err
			}
			fmt.Fprintf(stdout, "recovery: restored every ps from %s (global step %d)\n", filepath.Base(prefix), step)
			return step, nil
		}
	}
	job.s.RecoverTasks(o)
}
