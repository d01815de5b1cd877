package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/cmd/starwire/internal/lr"
	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/compute"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/internal/logline"
	"github.com/starwire/starwire/metrics"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
	"github.com/starwire/starwire/train"
)

// trainFlags are the flags of "starwire train".
type trainFlags struct {
	cfg    lr.Config
	stream streamFlags // trainstream.go
	flags.Cluster
	connectTimeout  time.Duration
	taskTimeout     time.Duration
	onFailure       string
	recoveryTimeout time.Duration
	cpuProfile      string
	transport       string
	afxdp           flags.AFXDP
	afxdpPath       string
	preset          string
	metrics         flags.Metrics
	pcap            flags.Pcap
	ckpt            checkpointFlags
}

// modelJobs are the jobs the training job runs on; a cluster's other jobs
// (a chief, an evaluator) are the driver's or outside the job.
var modelJobs = []string{"ps", "worker"}

func (f *trainFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.cfg.PS, "ps", f.cfg.PS, "parameter-server tasks of the local cluster (or of --registry_dir's)")
	fs.IntVar(&f.cfg.Workers, "workers", f.cfg.Workers, "worker tasks of the local cluster (or of --registry_dir's)")
	fs.IntVar(&f.cfg.Steps, "steps", f.cfg.Steps, "training steps per worker: the run ends at the global step it starts from (a checkpoint's) plus steps times workers, and trains again the steps a recovery undoes")
	fs.StringVar(&f.preset, "preset", "default", `the job's shape before the flags below change it: "default", or "transport" (a wider embedding and more features per example, so that pulling rows dominates a step: see lr.TransportConfig)`)
	fs.IntVar(&f.cfg.EmbeddingDim, "embedding_dim", f.cfg.EmbeddingDim, "embedding width")
	fs.IntVar(&f.cfg.Fields, "fields", f.cfg.Fields, "categorical features per example (embedding rows pulled per example)")
	fs.IntVar(&f.cfg.BatchSize, "batch_size", f.cfg.BatchSize, "examples per step and worker")
	fs.IntVar(&f.cfg.Vocab, "vocab", f.cfg.Vocab, "hashed feature ids (embedding rows) of the fixed table")
	fs.StringVar(&f.cfg.Embedding, "embedding", f.cfg.Embedding, `the embedding table: "fixed", --vocab rows the features are hashed into, or "hash", ids of the 64-bit space (each feature's string hashed, no vocabulary) in an embedding variable on each ps whose rows are made on first lookup`)
	fs.IntVar(&f.cfg.Values, "values", f.cfg.Values, "raw values per field of the click data: 0 draws --vocab values hashed into --vocab ids that share their hidden weights; N gives every feature a weight of its own, its id its string's hash with --embedding hash, field×N+value mod --vocab with the fixed table (with --embedding hash, 0 is 100000)")
	fs.Int64Var(&f.cfg.FilterFreq, "filter_freq", f.cfg.FilterFreq, "with --embedding hash, lookups of an id before its row is made; until then it reads the initial value and its gradients are dropped (0: every id at once)")
	fs.Int64Var(&f.cfg.StepsToLive, "steps_to_live", f.cfg.StepsToLive, "with --embedding hash and --checkpoint_dir, global steps a row may go without an update before it is evicted, at each checkpoint's save (0: never)")
	fs.Uint64Var(&f.cfg.Seed, "seed", f.cfg.Seed, "seed of the synthetic data and hidden model")
	fs.IntVar(&f.cfg.HeldOut, "held_out", f.cfg.HeldOut, "held-out examples evaluated before and after training")
	fs.Var((*float32Value)(&f.cfg.LearningRate), "learning_rate", "Adagrad learning rate, a positive `float`")
	fs.DurationVar(&f.cfg.ProgressEvery, "progress", f.cfg.ProgressEvery, "interval between progress lines (on a terminal the bar moves every 250ms unless this is given)")
	fs.DurationVar(&f.connectTimeout, "connect_timeout", 10*time.Second, "how long to wait for an existing cluster's tasks to answer")
	fs.DurationVar(&f.taskTimeout, "task_timeout", 5*time.Second, "a task that dies or stops answering fails the running steps within this bound (probed every third of it)")
	fs.StringVar(&f.onFailure, "on_failure", "recover", `what a lost task does to the run: "recover" (a lost worker loses only its steps in flight, the others take its batches until it answers again and rejoins; a lost ps pauses every worker until it answers again, at its address or the new one its --registry_dir entry gives, up to --recovery_timeout: then every ps is restored from --checkpoint_dir's newest checkpoint and the run goes on from its global step, or, without --checkpoint_dir, every ps starts afresh (with --embedding hash, the ps that restarted alone: the others keep their rows) and the model from step 0, with a warning), or "fail" (exit at once with the error)`)
	fs.DurationVar(&f.recoveryTimeout, "recovery_timeout", 10*time.Minute, "with --on_failure recover, how long to wait for a lost ps to answer again before failing the run")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&f.transport, "transport", "tcp", `what carries starwire calls under grpc+seastar: the driver's calls to the tasks, and the tasks' calls to each other unless --afxdp moves those: "tcp", or "udp" (afxdp's packet protocol on kernel UDP)`)
	flags.RegisterAFXDP(fs, &f.afxdp, flags.AFXDPAuto, `local cluster: give each task a network namespace, joined by veth pairs, and move the workers' RecvTensor calls to the parameter servers onto AF_XDP (the driver's calls stay on --transport)`)
	flags.RegisterAFXDPPath(fs, &f.afxdpPath, "calls between tasks joined by AF_XDP")
	f.Cluster.Register(fs)
	f.metrics.Register(fs)
	f.pcap.Register(fs)
	f.ckpt.register(fs)
	f.stream.register(fs)
}

func trainCmd(ctx context.Context, args []string, stdout io.Writer) (err error) {
	f := trainFlags{cfg: lr.DefaultConfig()}
	if err := f.applyPreset(args); err != nil {
		return err
	}
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	f.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if err := f.check(); err != nil {
		return err
	}
	if err := f.checkEmbedding(set); err != nil {
		return err
	}
	if err := f.ckpt.prepare(); err != nil {
		return err
	}
	if err := f.stream.prepare(f.cfg); err != nil {
		return err
	}
	if err := checkRegistryDir(f.RegistryDir); err != nil {
		return err
	}
	f.Cluster.Report = func(msg string) { fmt.Fprintf(os.Stderr, "starwire: train: %s\n", msg) }
	layout, joining, err := f.Cluster.Layout(ctx, set, flags.Need{PS: f.cfg.PS, Workers: f.cfg.Workers, Jobs: modelJobs})
	if err != nil {
		return flags.PrefixUsage("train", err)
	}
	if joining {
		f.cfg.PS, f.cfg.Workers = layout.Cluster.NumTasks("ps"), layout.Cluster.NumTasks("worker")
		if f.cfg.PS == 0 || f.cfg.Workers == 0 {
			return flags.Usagef("train: the cluster has %s and %s, want at least one of each",
				plural(f.cfg.PS, "ps task"), plural(f.cfg.Workers, "worker task"))
		}
		if err := f.checkConfig(); err != nil {
			return err
		}
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		defer stop()
	}
	tr, err := flags.ChooseTransport("train", f.transport)
	if err != nil {
		return err
	}
	if err := f.TLS.Secure("train", &tr); err != nil {
		return err
	}
	auth, err := f.Packet.Auth("train")
	if err != nil {
		return err
	}
	if joining && f.transport == "udp" && !auth.Shared() {
		// The tasks take packet sessions only under their ticket: without
		// it every call would fail, one connect timeout at a time.
		return flags.Usagef("train: a cluster's packet path (--transport udp) opens sessions only under the ticket its tasks hold: give --packet_ticket_file (or $%s), or --insecure_packet_path if the tasks were started with it", cluster.EnvPacketTicketFile)
	}
	f.Packet.Secure(&tr, auth)
	if err := f.pcap.Open("train", &tr); err != nil {
		return err
	}
	defer func() {
		if cerr := f.pcap.Close("train", stdout); err == nil {
			err = cerr
		}
	}()
	m, stop, err := f.metrics.Start("train", stdout)
	if err != nil {
		return err
	}
	defer stop()
	r := &trainRun{f: &f, layout: layout, tr: tr, stdout: stdout, progressSet: set["progress"], set: set, metrics: m}
	if joining {
		err = r.join(ctx)
	} else {
		var dir string
		if dir, err = makeTrainDir(); err != nil {
			return fmt.Errorf("train: %w", err)
		}
		defer os.RemoveAll(dir)
		err = r.startLocal(ctx, dir)
	}
	if r.local != nil {
		defer r.local.Close()
	}
	if r.restoreProcs != nil {
		defer r.restoreProcs()
	}
	if err != nil {
		return err
	}
	return r.train(ctx)
}

// applyPreset starts the config from the preset args name, so that the
// other flags, parsed after, change it and their defaults show it.
func (f *trainFlags) applyPreset(args []string) error {
	probe := flag.NewFlagSet("train", flag.ContinueOnError)
	probe.SetOutput(io.Discard)
	probe.Usage = func() {}
	var discard trainFlags
	discard.register(probe)
	probe.Parse(args) // errors are parseFlags's to report
	switch p := probe.Lookup("preset").Value.String(); p {
	case "default":
	case "transport":
		f.cfg = lr.TransportConfig()
	default:
		return flags.Usagef(`train: --preset %q, want "default" or "transport"`, p)
	}
	f.preset = probe.Lookup("preset").Value.String()
	return nil
}

// check reports flags that cannot run, naming the flag.
func (f *trainFlags) check() error {
	switch f.onFailure {
	case "recover", "fail":
	default:
		return flags.Usagef(`train: --on_failure %q, want "recover" or "fail"`, f.onFailure)
	}
	if f.recoveryTimeout <= 0 {
		return flags.Usagef("train: --recovery_timeout %v, want > 0", f.recoveryTimeout)
	}
	if _, err := flags.ParseAFXDPPath("train", f.afxdpPath); err != nil {
		return err
	}
	return f.checkConfig()
}

// checkEmbedding refuses the flags --embedding hash has no use for, or
// cannot honor yet; the flags only it takes are lr.Config's to check.
func (f *trainFlags) checkEmbedding(set map[string]bool) error {
	incr := f.ckpt.incrSteps > 0 || f.ckpt.incrSecs > 0
	if f.cfg.Embedding != lr.EmbeddingHash {
		if incr {
			return flags.Usagef("train: increments save the rows of --embedding hash changed since the last save; the fixed table's checkpoints are full")
		}
		return nil
	}
	// A worker's step reads the global step (its rows' version) when it
	// starts; a few more may be in flight, and prefetched, when a save
	// begins.
	f.ckpt.inFlight = 4 * int64(f.cfg.Workers)
	switch {
	case set["vocab"]:
		return flags.Usagef("train: --vocab sizes the fixed table, and --embedding hash has none: --values sets the click data's values per field")
	case f.cfg.StepsToLive > 0 && f.ckpt.dir == "":
		return flags.Usagef("train: --steps_to_live evicts rows when a checkpoint is saved: give --checkpoint_dir")
	case incr && f.ckpt.dir == "":
		return flags.Usagef("train: increments are saved in --checkpoint_dir: give it")
	}
	if f.cfg.Values == 0 {
		f.cfg.Values = lr.DefaultConfig().Vocab
	}
	return nil
}

func (f *trainFlags) checkConfig() error {
	err := f.cfg.Validate()
	var se *lr.SettingError
	if errors.As(err, &se) {
		return flags.Usagef("train: --%s %v, want %s", se.Setting, se.Value, se.Want)
	}
	if err != nil {
		return flags.Usagef("train: %v", err)
	}
	return nil
}

// checkRegistryDir refuses a --registry_dir that is not a directory:
// train only reads it, so waiting for tasks to register in a directory
// that does not exist would most likely wait for a typo.
func checkRegistryDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return flags.Usagef("train: --registry_dir %s: no such directory (the tasks' serve --registry_dir makes it: start them first, or mkdir it)", dir)
	case err != nil:
		return flags.Usagef("train: --registry_dir: %v", err)
	case !fi.IsDir():
		return flags.Usagef("train: --registry_dir %s: not a directory", dir)
	}
	return nil
}

// A trainRun is one training job on a cluster it started or joined.
type trainRun struct {
	f           *trainFlags
	layout      tasks.Layout
	tr          flags.Transport
	local       *tasks.Local // the cluster started here, if any
	stdout      io.Writer
	progressSet bool
	set         map[string]bool  // the flags given
	peers       *tasks.Peers     // the driver's, once training
	metrics     *metrics.Metrics // nil without --metrics_addr
	// restoreProcs undoes the local cluster's spare P, for a caller that
	// goes on in this process (tests).
	restoreProcs func()
}

// startLocal starts the in-process cluster, its endpoint map in dir.
func (r *trainRun) startLocal(ctx context.Context, dir string) error {
	logger := logline.New(os.Stderr, "starwire: train: ")
	policy, _ := netpath.ParsePolicy(r.f.afxdpPath) // checked
	procs, restore := addSpareProc()
	r.restoreProcs = restore
	local, why, err := startLocal(tasks.LocalOptions{
		PS: r.f.cfg.PS, Workers: r.f.cfg.Workers, Protocol: r.layout.Protocol, Net: r.tr.Net, Dir: dir, Logger: logger,
		Metrics: r.metrics, Compute: compute.Process, Pcap: r.f.pcap.Capture(), TLS: r.layout.TLS, NoAllowlist: !r.f.Allowlist, AFXDPPath: policy,
		CheckpointDir: r.f.ckpt.dir, StreamDir: r.f.stream.dir, StreamKeep: r.f.stream.keep,
	}, r.f.afxdp)
	if err != nil {
		return fmt.Errorf("train: start local cluster: %w", err)
	}
	r.local, r.tr.Fallback, r.layout = local, why, local.Layout
	if why == "" {
		procs.addReactorProcs(local.SpinningReactors())
	}
	// The master side asks every task for its status over gRPC first, as
	// TensorFlow's master does whatever the worker protocol.
	if err := tasks.Await(ctx, r.layout, r.f.connectTimeout); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	fmt.Fprintf(r.stdout, "local cluster: %s\n", r.layout.Cluster)
	fmt.Fprintf(r.stdout, "runtime: %s\n", procs)
	if local.EndpointMapPath != "" {
		fmt.Fprintf(r.stdout, "endpoint map %s: %s\n", local.EndpointMapPath, endpointPairs(r.layout.Endpoints))
	}
	for _, w := range local.ReactorWarnings() {
		fmt.Fprintf(os.Stderr, "starwire: train: warning: %s\n", w)
	}
	return nil
}

// join waits for an existing cluster's tasks to answer.
func (r *trainRun) join(ctx context.Context) error {
	r.tr.Fallback = flags.AFXDPFallback(flags.DriverOnTCP)
	as := ""
	if c := r.f.TFConfig; c != nil && c.TaskType != "" && r.layout.Cluster.NumTasks(c.TaskType) == 0 {
		as = " as " + c.TaskName() + ", the driver"
	}
	fmt.Fprintf(r.stdout, "joining cluster: %s%s\n", r.layout.Cluster, as)
	if r.f.onFailure != "recover" {
		if err := tasks.Await(ctx, r.layout, r.f.connectTimeout); err != nil {
			return fmt.Errorf("train: %w", err)
		}
		return nil
	}
	// A worker missing at the start is one lost: the run starts with the
	// workers that answer, and takes it in when it does.
	missing, err := tasks.AwaitSome(ctx, r.layout, r.f.connectTimeout, "worker")
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	for _, task := range missing {
		fmt.Fprintf(r.stdout, "recovery: %s does not answer yet: the other workers take its batches until it joins\n", task)
	}
	return nil
}

// train runs the job and prints its summary.
func (r *trainRun) train(ctx context.Context) error {
	f, stdout := r.f, r.stdout
	fmt.Fprintf(stdout, "protocol %s; driver's calls over %s%s%s\n",
		r.layout.Protocol, flags.DriverPath(r.layout.Protocol, r.tr), r.reactors(), flags.TLSNote(r.layout))
	fmt.Fprintf(stdout, "tasks' calls to each other: %s\n", peerPaths(r.peerInfos(ctx), false))
	if r.local != nil && r.tr.Fallback != "" && r.layout.Protocol.UsesStar() {
		fmt.Fprintf(stdout, "not on AF_XDP: %s\n", r.tr.Fallback)
	}
	dialer, closer, err := r.tr.Net.Dialer()
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	if closer != nil {
		defer closer.Close()
	}
	layout := r.layout
	layout.Transport = dialer
	layout.FailFast = true
	if r.metrics != nil {
		layout.Interceptors = append(layout.Interceptors, r.metrics.ClientInterceptor())
	}
	peers := tasks.NewPeers(layout)
	defer peers.Close()
	r.peers = peers
	var callers []driver.Caller
	for _, job := range modelJobs {
		for _, i := range layout.Cluster.TaskIndices(job) {
			c, err := peers.Caller(cluster.TaskName(job, i))
			if err != nil {
				return fmt.Errorf("train: %w", err)
			}
			callers = append(callers, c)
		}
	}
	d := driver.New(fmt.Sprintf("train-%d-%d", os.Getpid(), time.Now().UnixNano()), callers...)
	d.Watch(f.taskTimeout)
	stats := func() handlers.Stats {
		s := d.Stats()
		if r.local != nil {
			c, b := r.local.PeerStats()
			s = s.Add(handlers.Stats{Calls: c, Bytes: b})
		}
		return s
	}
	display := newProgressDisplay(stdout)
	cfg := f.cfg
	cfg.ProgressEvery = display.interval(cfg.ProgressEvery, r.progressSet)
	if r.local != nil {
		cfg.Compute = compute.Process
	}
	job, err := newTrainJob(cfg, d, stats)
	if err != nil {
		return flags.Usagef("train: %v", err)
	}
	if r.local != nil {
		job.taskStats = func(task string) handlers.Stats {
			s := d.TaskStats(task)
			c, b := r.local.TaskPeerStats(task)
			return s.Add(handlers.Stats{Calls: c, Bytes: b})
		}
	}
	var saver *train.CheckpointSaverHook
	if f.onFailure == "recover" {
		r.recover(job, r.rejoiner(peers, d), &saver, stdout)
	}
	setupCtx, cancel := context.WithTimeout(ctx, f.connectTimeout)
	err = job.s.Setup(setupCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("train: set up: %w%s", err, r.joinHint(err))
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		job.s.Close(ctx)
	}()
	saver, err = f.ckpt.start(ctx, job, stdout)
	if err != nil {
		return err
	}
	stream, err := f.stream.start(job, f.cfg.Workers)
	if err != nil {
		return err
	}
	// --steps per worker from the global step restored: the step the run
	// ends at, whatever a recovery undoes meanwhile.
	job.s.StopAtStep(job.s.GlobalStep() + f.cfg.TotalSteps())
	fmt.Fprintf(stdout, "training: %s, %s, %d steps per worker, batch %d, %s, embedding_dim %d, seed %d\n",
		plural(f.cfg.PS, "ps task"), plural(f.cfg.Workers, "worker task"), f.cfg.Steps, f.cfg.BatchSize, embeddingNote(f.cfg), f.cfg.EmbeddingDim, f.cfg.Seed)
	// A joined cluster's tasks count their calls since they started: what
	// this run made is the difference.
	var infosBefore []peerInfo
	if r.local == nil {
		infosBefore = r.peerInfos(ctx)
	}
	sum, err := job.run(ctx, display.update)
	display.finish()
	if err != nil {
		return errors.Join(fmt.Errorf("train: %w", err), f.ckpt.saveOnStop(ctx, saver, stdout))
	}
	if err := f.ckpt.finish(ctx, saver, stdout); err != nil {
		return err
	}
	if err := stream.finish(ctx, job, f.stream.dir, stdout); err != nil {
		return err
	}
	infos := r.peerInfos(ctx)
	if r.local == nil {
		infos = peerDeltas(infosBefore, infos)
	}
	printSummary(stdout, sum, r.route(), infos, r.local != nil)
	if r.local != nil {
		printPathStats(stdout, r.local)
	}
	return nil
}

// route says what carried the job's calls, and why.
func (r *trainRun) route() routeNote {
	n := routeNote{protocol: r.layout.Protocol, driver: flags.DriverPath(r.layout.Protocol, r.tr), driverPath: "gRPC"}
	if r.layout.Protocol.UsesStar() {
		n.driverPath = r.tr.Net.Name()
	}
	switch {
	case r.local == nil:
		n.why = "chosen by each task (its serve report says how)"
	case !r.layout.Protocol.UsesStar():
		n.why = "gRPC, as protocol " + string(r.layout.Protocol) + " has no starwire worker service"
	default:
		var stats []afxdprpc.PathStats
		for _, s := range r.local.Servers {
			stats = append(stats, s.PathStats()...)
		}
		n.why = pathReason(r.tr.Fallback, stats)

	}
	return n
}

// printPathStats says, for each task's dual connections to its peers, how
// many calls and bytes took AF_XDP and TCP, and which sizes go over AF_XDP.
func printPathStats(w io.Writer, l *tasks.Local) {
	byAddr := map[string]string{}
	for _, s := range l.Servers {
		byAddr[s.StarAddr] = shortTask(s.Task())
	}
	for _, s := range l.Servers {
		for _, st := range s.PathStats() {
			fmt.Fprintf(w, "  %s→%s per call (%s): AF_XDP %d calls, %.1f MB; TCP %d calls, %.1f MB; sizes over AF_XDP now: %s\n",
				shortTask(s.Task()), byAddr[st.Peer], st.Policy, st.AFXDPCalls, float64(st.AFXDPBytes)/1e6,
				st.TCPCalls, float64(st.TCPBytes)/1e6, st.AFXDPSizes)
		}
	}
}

// reactors describes the reactor counts of the driver's TCP transport and,
// for a local cluster, of its tasks', or "" when starwire is not on TCP.
func (r *trainRun) reactors() string {
	if _, tcp := r.tr.Net.(tasks.TCPNet); !tcp || !r.layout.Protocol.UsesStar() {
		return ""
	}
	out := "; reactors: driver " + cluster.SharedReactors().String()
	if r.local == nil {
		return out
	}
	for _, s := range r.local.Servers {
		if s.Reactors.N > 0 && s.Index == 0 {
			out += ", each " + s.Job + " task " + s.Reactors.String()
		}
	}
	return out
}

// peerInfos says, per task, what carries its calls to its peers: read from
// the tasks of a local cluster, asked of a joined cluster's over gRPC.
func (r *trainRun) peerInfos(ctx context.Context) []peerInfo {
	var out []peerInfo
	opts, err := r.layout.GRPCDialOptions()
	if err != nil {
		return nil
	}
	if r.local != nil {
		for _, s := range r.local.Servers {
			out = append(out, peerInfo{Info: s.Info()})
		}
		return out
	}
	for _, job := range modelJobs {
		for _, i := range r.layout.Cluster.TaskIndices(job) {
			addr, _ := r.layout.Cluster.Lookup(job, i)
			if r.peers != nil {
				// A task that restarted elsewhere is asked there.
				if a, err := r.peers.Addrs(cluster.TaskName(job, i)); err == nil {
					addr = a.GRPC
				}
			}
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			info, err := tasks.QueryInfo(qctx, addr, opts...)
			cancel()
			if info.Task == "" {
				info.Task = cluster.TaskName(job, i)
			}
			out = append(out, peerInfo{Info: info, err: err})
		}
	}
	return out
}

// embeddingNote describes the job's table for the training line: "vocab
// 100000", or the hash embedding's admission.
func embeddingNote(c lr.Config) string {
	if c.Embedding != lr.EmbeddingHash {
		return "vocab " + strconv.Itoa(c.Vocab)
	}
	note := "embedding hash (64-bit ids, " + strconv.Itoa(c.Values) + " values per field"
	if c.FilterFreq > 1 {
		note += ", filter_freq " + strconv.FormatInt(c.FilterFreq, 10)
	}
	return note + ")"
}

// plural writes n and noun, with an s unless n is 1: "1 ps task", "2 ps tasks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// float32Value is a float32 flag, shown as the float32 it holds: 0.2, not
// 0.20000000298023224.
type float32Value float32

func (v *float32Value) String() string {
	if v == nil {
		return "0"
	}
	return strconv.FormatFloat(float64(*v), 'g', -1, 32)
}

func (v *float32Value) Set(s string) error {
	f, err := strconv.ParseFloat(s, 32)
	if err != nil {
		return errors.New("not a number")
	}
	*v = float32Value(f)
	return nil
}

// startLocal starts the local cluster, with AF_XDP between the tasks as
// mode says, and returns why AF_XDP is not used
// ("" when it is).
func startLocal(opts tasks.LocalOptions, mode flags.AFXDP) (*tasks.Local, string, error) {
	why := flags.AFXDPFallback(flags.OnLoopback)
	switch {
	case mode == flags.AFXDPOff:
		why = "--afxdp off"
	case !opts.Protocol.UsesStar():
		why = "protocol " + string(opts.Protocol) + " has no starwire worker service"
	case os.Geteuid() != 0 && mode == flags.AFXDPAuto:
	default:
		xo := opts
		xo.AFXDP = true
		l, err := tasks.StartLocal(xo)
		if err == nil {
			return l, "", nil
		}
		if mode == flags.AFXDPOn && errors.Is(err, fs.ErrPermission) {
			return nil, "", fmt.Errorf("--afxdp on needs root (network namespaces and AF_XDP sockets): %w", err)
		}
		if mode == flags.AFXDPOn {
			return nil, "", err
		}
		why = "AF_XDP setup failed: " + err.Error()
	}
	l, err := tasks.StartLocal(opts)
	return l, why, err
}

// endpointPairs lists an endpoint map on one line.
func endpointPairs(m cluster.EndpointMap) string {
	var parts []string
	for g, s := range m.All() {
		parts = append(parts, g+"="+s)
	}
	return strings.Join(parts, " ")
}
