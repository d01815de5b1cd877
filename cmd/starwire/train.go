package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/lr"
	"github.com/starwire/starwire/cmd/starwire/internal/tasks"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc/cluster"
)

// trainFlags are the flags of "starwire train".
type trainFlags struct {
	cfg lr.Config
	clusterFlags
	connectTimeout time.Duration
}

func trainCmd(ctx context.Context, args []string, stdout io.Writer) error {
	f := trainFlags{cfg: lr.DefaultConfig()}
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	fs.IntVar(&f.cfg.PS, "ps", f.cfg.PS, "parameter-server tasks of the local cluster (or of --registry_dir's)")
	fs.IntVar(&f.cfg.Workers, "workers", f.cfg.Workers, "worker tasks of the local cluster (or of --registry_dir's)")
	fs.IntVar(&f.cfg.Steps, "steps", f.cfg.Steps, "training steps per worker")
	fs.IntVar(&f.cfg.EmbeddingDim, "embedding_dim", f.cfg.EmbeddingDim, "embedding width")
	fs.IntVar(&f.cfg.BatchSize, "batch_size", f.cfg.BatchSize, "examples per step and worker")
	fs.IntVar(&f.cfg.Vocab, "vocab", f.cfg.Vocab, "hashed feature ids (embedding rows)")
	fs.Uint64Var(&f.cfg.Seed, "seed", f.cfg.Seed, "seed of the synthetic data and hidden model")
	fs.IntVar(&f.cfg.HeldOut, "held_out", f.cfg.HeldOut, "held-out examples evaluated before and after training")
	lrate := fs.Float64("learning_rate", float64(f.cfg.LearningRate), "Adagrad learning rate")
	fs.DurationVar(&f.cfg.ProgressEvery, "progress", f.cfg.ProgressEvery, "interval between progress lines")
	fs.DurationVar(&f.connectTimeout, "connect_timeout", 10*time.Second, "how long to wait for an existing cluster's tasks to answer")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	transport := fs.String("transport", "tcp", `starwire transport under grpc+seastar: "tcp", or "udp" (afxdp's packet protocol on kernel UDP)`)
	useXDP := fs.String("afxdp", "auto", `local cluster: "on" puts each task in a network namespace, joined by veth pairs, and carries the workers' RecvTensor calls over AF_XDP; "auto" does so when it can (root), "off" never`)
	f.clusterFlags.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		defer stop()
	}
	f.cfg.LearningRate = float32(*lrate)
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	layout, joining, err := f.clusterFlags.layout(ctx, set, f.cfg.PS, f.cfg.Workers)
	if err != nil {
		return err
	}
	if joining {
		f.cfg.PS, f.cfg.Workers = layout.Cluster.NumTasks("ps"), layout.Cluster.NumTasks("worker")
		if f.cfg.PS == 0 || f.cfg.Workers == 0 {
			return usagef("train: the cluster has %d ps and %d worker tasks, want at least one of each", f.cfg.PS, f.cfg.Workers)
		}
	}
	if err := f.cfg.Validate(); err != nil {
		return usagef("train: %v", err)
	}
	switch *useXDP {
	case "auto", "on", "off":
	default:
		return usagef(`train: --afxdp %q, want "auto", "on" or "off"`, *useXDP)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tr, err := chooseTransport(*transport)
	if err != nil {
		return err
	}

	var local *tasks.Local
	if !joining {
		dir, err := os.MkdirTemp("", "starwire-train-")
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		defer os.RemoveAll(dir)
		local, tr.fallback, err = startLocal(tasks.LocalOptions{
			PS: f.cfg.PS, Workers: f.cfg.Workers, Protocol: layout.Protocol, Net: tr.net, Dir: dir, Logger: logger,
		}, *useXDP)
		if err != nil {
			return fmt.Errorf("train: start local cluster: %w", err)
		}
		defer local.Close()
		layout = local.Layout
		tr.peers = local.PeerTransport
		// The master side asks every task for its status over gRPC first,
		// as TensorFlow's master does whatever the worker protocol.
		if err := awaitCluster(ctx, layout, f.connectTimeout); err != nil {
			return fmt.Errorf("train: %w", err)
		}
		fmt.Fprintf(stdout, "local cluster: %s\n", layout.Cluster)
		if local.EndpointMapPath != "" {
			fmt.Fprintf(stdout, "endpoint map %s: %s\n", local.EndpointMapPath, endpointPairs(layout.Endpoints))
		}
	} else {
		tr.fallback = afxdpFallback(driverOnTCP)
		fmt.Fprintf(stdout, "joining cluster: %s\n", layout.Cluster)
		if err := awaitCluster(ctx, layout, f.connectTimeout); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	transportLine := transportName(layout.Protocol, tr)
	fmt.Fprintf(stdout, "protocol %s, transport %s\n", layout.Protocol, transportLine)

	dialer, closer, err := tr.net.Dialer()
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if closer != nil {
		defer closer.Close()
	}
	layout.Transport = dialer
	peers := tasks.NewPeers(layout)
	defer peers.Close()
	var callers []driver.Caller
	for _, job := range []string{"ps", "worker"} {
		for _, i := range layout.Cluster.TaskIndices(job) {
			c, err := peers.Caller(cluster.TaskName(job, i))
			if err != nil {
				return fmt.Errorf("train: %w", err)
			}
			callers = append(callers, c)
		}
	}
	d := driver.New(fmt.Sprintf("train-%d-%d", os.Getpid(), time.Now().UnixNano()), callers...)
	stats := func() driver.Stats {
		s := d.Stats()
		if local != nil {
			c, b := local.PeerStats()
			s = s.Add(driver.Stats{Calls: c, Bytes: b})
		}
		return s
	}
	job, err := lr.New(f.cfg, d, stats)
	if err != nil {
		return usagef("train: %v", err)
	}
	setupCtx, cancel := context.WithTimeout(ctx, f.connectTimeout)
	err = job.Setup(setupCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("train: set up: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		job.Close(ctx)
	}()
	fmt.Fprintf(stdout, "training: %d ps, %d workers, %d steps per worker, batch %d, vocab %d, embedding_dim %d, seed %d\n",
		f.cfg.PS, f.cfg.Workers, f.cfg.Steps, f.cfg.BatchSize, f.cfg.Vocab, f.cfg.EmbeddingDim, f.cfg.Seed)
	sum, err := job.Run(ctx, func(p lr.Progress) {
		fmt.Fprintf(stdout, "step %6d  %8.0f examples/s  loss %.4f  %7.0f RPC/s  %7.1f MB/s\n",
			p.Steps, p.ExamplesPerSec, p.Loss, p.RPCsPerSec, p.MBPerSec)
	})
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	printSummary(stdout, sum, layout.Protocol, transportLine, !joining)
	return nil
}

// printSummary prints the run's outcome; allRPCs says whether the counts
// include the tasks' calls to each other (only when they run here).
func printSummary(w io.Writer, s *lr.Summary, p cluster.Protocol, transport string, allRPCs bool) {
	fmt.Fprintf(w, "summary:\n")
	fmt.Fprintf(w, "  steps %d, examples %d in %.2fs: %.0f examples/s\n", s.Steps, s.Examples, s.Elapsed.Seconds(), s.ExamplesPerSec())
	fmt.Fprintf(w, "  held-out loss: initial %.4f, final %.4f (hidden model %.4f, click rate alone %.4f)\n", s.InitialLoss, s.FinalLoss, s.BayesLoss, s.BaseRateLoss)
	fmt.Fprintf(w, "  training loss: first tenth %.4f, last tenth %.4f\n", s.FirstTrainLoss, s.LastTrainLoss)
	fmt.Fprintf(w, "  held-out accuracy: %.2f%%\n", 100*s.Accuracy)
	which := "driver and task-to-task"
	if !allRPCs {
		which = "driver's only; the tasks' RecvTensor calls happen in their processes"
	}
	fmt.Fprintf(w, "  RPCs (%s): %d (%.0f/s), bytes moved: %.1f MB (%.1f MB/s)\n", which, s.Calls, float64(s.Calls)/s.Elapsed.Seconds(), float64(s.Bytes)/1e6, float64(s.Bytes)/1e6/s.Elapsed.Seconds())
	fmt.Fprintf(w, "  protocol: %s, transport: %s\n", p, transport)
}

// startLocal starts the local cluster, with AF_XDP between the tasks as
// mode ("auto", "on", "off") says, and returns why AF_XDP is not used
// ("" when it is).
func startLocal(opts tasks.LocalOptions, mode string) (*tasks.Local, string, error) {
	why := afxdpFallback(onLoopback)
	switch {
	case mode == "off":
		why = "--afxdp off"
	case !opts.Protocol.UsesStar():
		why = "protocol " + string(opts.Protocol) + " has no starwire worker service"
	case os.Geteuid() != 0 && mode == "auto":
	default:
		xo := opts
		xo.AFXDP = true
		l, err := tasks.StartLocal(xo)
		if err == nil {
			return l, "", nil
		}
		if mode == "on" {
			return nil, "", err
		}
		why = "AF_XDP setup failed: " + err.Error()
	}
	l, err := tasks.StartLocal(opts)
	return l, why, err
}
