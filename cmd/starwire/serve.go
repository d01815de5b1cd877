package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/internal/logline"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
)

// serveFlags are the flags of "starwire serve".
type serveFlags struct {
	flags.Cluster
	job                string
	index, ps, workers int
	host, iface, net   string
	afxdpPath          string
	afxdp              flags.AFXDP
	checkpointDir      string
	streamDir          string // serve_stream.go
	streamKeep         int
	recordDir          string
	report             time.Duration
	stdout             io.Writer
	metrics            flags.Metrics
	pcap               flags.Pcap
	priv               privFlags
}

// serveCmd runs one task until interrupted.
func serveCmd(ctx context.Context, args []string, stdout io.Writer) (err error) {
	f := serveFlags{stdout: stdout}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&f.job, "job", "", `the task's job, "ps" or "worker" (default TF_CONFIG's task type)`)
	fs.IntVar(&f.index, "task", 0, "the task's index in its job (default TF_CONFIG's task index)")
	fs.IntVar(&f.ps, "ps", 0, "with --registry_dir: the cluster's parameter-server tasks")
	fs.IntVar(&f.workers, "workers", 0, "with --registry_dir: the cluster's worker tasks")
	fs.StringVar(&f.host, "host", "127.0.0.1", "with --registry_dir: the address to bind and publish")
	fs.StringVar(&f.iface, "afxdp_iface", "", "carry this task's calls to its peers over AF_XDP on this interface, whose address is the task's starwire host (every task must); --transport still carries the calls it receives from drivers")
	flags.RegisterAFXDP(fs, &f.afxdp, flags.AFXDPAuto, "with --afxdp_iface: carry the task's calls to its peers over AF_XDP")
	flags.RegisterAFXDPPath(fs, &f.afxdpPath, "calls to peers (with --afxdp_iface and --transport tcp)")
	fs.StringVar(&f.net, "transport", "tcp", `starwire transport under grpc+seastar: "tcp", or "udp" (afxdp's packet protocol on kernel UDP); the same in every process`)
	fs.StringVar(&f.recordDir, "record_dir", "", "write every request the task receives over gRPC to this directory, one binary protobuf file each (NNNNN-Method.pb, the first 10000): what a TensorFlow master sent, kept as test data (default: none)")
	fs.StringVar(&f.checkpointDir, "checkpoint_dir", "", "the directory the task's SaveV2, RestoreV2 and MergeV2Checkpoints read and write (created if missing); a graph's checkpoint prefixes must lie inside it, relative ones are taken under it (default: checkpoints refused)")
	fs.DurationVar(&f.report, "report", 10*time.Second, "interval between the lines saying what the task did (0: none)")
	f.registerStream(fs)
	f.Cluster.Register(fs)
	f.metrics.Register(fs)
	f.pcap.Register(fs)
	f.priv.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if err := f.resolveTask(set); err != nil {
		return err
	}
	if err := f.makeCheckpointDir(); err != nil {
		return err
	}
	if err := f.makeStreamDir(); err != nil {
		return err
	}
	policy, err := flags.ParseAFXDPPath("serve", f.afxdpPath)
	if err != nil {
		return err
	}
	tr, err := flags.ChooseTransport("serve", f.net)
	if err != nil {
		return err
	}
	if err := f.TLS.Secure("serve", &tr); err != nil {
		return err
	}
	auth, err := f.Packet.Auth("serve")
	if err != nil {
		return err
	}
	if err := f.checkAFXDP(); err != nil {
		return err
	}
	if (f.net == "udp" || f.iface != "") && !auth.Shared() {
		return flags.Usagef("serve: the packet path (--transport udp, --afxdp_iface) opens sessions only under the ticket every task holds: give --packet_ticket_file (or $%s; openssl rand -hex 40 makes one), or --insecure_packet_path", cluster.EnvPacketTicketFile)
	}
	f.Packet.Secure(&tr, auth)
	if f.pcap.Path != "" && f.net == "tcp" && f.iface == "" {
		return flags.Usagef("serve: --pcap captures the packet path: give --transport udp or --afxdp_iface")
	}
	if err := f.pcap.Open("serve", &tr); err != nil {
		return err
	}
	defer func() {
		if cerr := f.pcap.Close("serve", stdout); err == nil {
			err = cerr
		}
	}()
	var s *tasks.Server
	var layout tasks.Layout
	if f.RegistryDir != "" {
		s, layout, err = f.joinRegistry(ctx, set, tr)
	} else {
		s, layout, err = f.joinCluster(ctx, set, tr)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	m, stop, err := f.metrics.Start("serve", stdout)
	if err != nil {
		return err
	}
	defer stop()
	s.Metrics, s.Pcap, s.PacketAuth, s.AFXDPPath = m, f.pcap.Capture(), auth, policy
	s.CheckpointDir, s.StreamDir, s.StreamKeep = f.checkpointDir, f.streamDir, f.streamKeep
	s.RecordDir = f.recordDir
	if f.RegistryDir != "" {
		f.Guard(s, set, flags.Need{PS: f.ps, Workers: f.workers})
		s.Lookup = func(task string) (tasks.Addrs, error) {
			job, idx, err := cluster.ParseTaskName(task)
			if err != nil {
				return tasks.Addrs{}, err
			}
			return registeredAddrs(f.RegistryDir, job, idx, layout.Protocol)
		}
	} else {
		f.Guard(s, set, flags.Need{Self: &flags.TaskRef{Job: f.job, Index: f.index}})
	}
	return f.serve(ctx, s, layout)
}

// resolveTask takes the task from TF_CONFIG where the flags do not give it
// and checks it.
func (f *serveFlags) resolveTask(set map[string]bool) error {
	cfg, haveTF, err := cluster.LoadTFConfig()
	if err != nil {
		return flags.Usagef("serve: %v", err)
	}
	if !set["job"] && haveTF {
		f.job = cfg.TaskType
		if !set["task"] {
			f.index = cfg.TaskIndex
		}
	}
	switch {
	case f.job == "":
		return flags.Usagef("serve: --job is required (or TF_CONFIG's task)")
	case f.index < 0:
		return flags.Usagef("serve: --task %d, want >= 0", f.index)
	case f.job == "chief" || f.job == "evaluator":
		return flags.Usagef("serve: --job %s: serve runs ps and worker tasks; the %s is the driver, \"starwire train\"", f.job, f.job)
	}
	return nil
}

// makeCheckpointDir makes --checkpoint_dir absolute, so that prefixes are
// checked against one place whatever the working directory, and creates
// it: a save into a directory that is not there would fail only when the
// first checkpoint is due, hours into training.
func (f *serveFlags) makeCheckpointDir() error {
	if f.checkpointDir == "" {
		return nil
	}
	dir, err := filepath.Abs(f.checkpointDir)
	if err != nil {
		return flags.Usagef("serve: --checkpoint_dir %s: %v", f.checkpointDir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("serve: --checkpoint_dir: %w", err)
	}
	f.checkpointDir = dir
	return nil
}

// joinRegistry binds the task on port 0, publishes its addresses in the
// registry directory, and waits for the rest of the cluster.
func (f *serveFlags) joinRegistry(ctx context.Context, set map[string]bool, tr flags.Transport) (*tasks.Server, tasks.Layout, error) {
	var layout tasks.Layout
	task := cluster.TaskName(f.job, f.index)
	if set["cluster"] {
		return nil, layout, flags.Usagef("serve: --cluster and --registry_dir both name the cluster; give one")
	}
	want := map[string]int{"ps": f.ps, "worker": f.workers}
	if n, ok := want[f.job]; !ok || f.index >= n {
		return nil, layout, flags.Usagef("serve: task %s is not in a cluster of --ps %d and --workers %d", task, f.ps, f.workers)
	}
	proto, err := cluster.ParseProtocol(f.Protocol)
	if err != nil {
		return nil, layout, flags.Usagef("serve: %v", err)
	}
	bind := net.JoinHostPort(f.host, "0")
	s, err := tasks.Listen(f.job, f.index, bind, bind, proto.UsesStar(), tasks.SizeFor(tr.Net, f.ps+f.workers))
	if err != nil {
		return nil, layout, fmt.Errorf("serve: %w", err)
	}
	addrs := map[string]string{cluster.AddrGRPC: s.GRPCAddr}
	if s.StarAddr != "" {
		addrs[cluster.AddrStar] = s.StarAddr
	}
	// A lease: killed with SIGKILL, the task leaves its file behind, which
	// others ignore once it goes unrenewed (at once on this machine).
	lease, err := cluster.RegisterLease(f.RegistryDir, f.job, f.index, addrs, 0)
	if err != nil {
		s.Close()
		return nil, layout, fmt.Errorf("serve: %w", err)
	}
	s.OnClose(func() {
		if err := lease.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "starwire: serve: %v\n", err)
		}
	})
	fmt.Fprintf(f.stdout, "%s registered grpc %s%s in %s; waiting for the cluster\n", task, s.GRPCAddr, orEmpty(", starwire ", s.StarAddr), f.RegistryDir)
	if layout, _, err = f.Layout(ctx, set, flags.Need{PS: f.ps, Workers: f.workers}); err != nil {
		s.Close()
		return nil, layout, fmt.Errorf("serve: %w", err)
	}
	layout.Protocol = proto
	return s, layout, nil
}

// joinCluster binds the task at its addresses in the cluster spec (and the
// endpoint map).
func (f *serveFlags) joinCluster(ctx context.Context, set map[string]bool, tr flags.Transport) (*tasks.Server, tasks.Layout, error) {
	layout, joined, err := f.Layout(ctx, set, flags.Need{Self: &flags.TaskRef{Job: f.job, Index: f.index}})
	if err != nil {
		return nil, layout, flags.PrefixUsage("serve", err)
	}
	if !joined {
		return nil, layout, flags.Usagef("serve: give the cluster with --cluster, TF_CONFIG or --registry_dir")
	}
	s, err := tasks.ListenAt(layout, f.job, f.index, tr.Net)
	var le *tasks.LayoutError
	if errors.As(err, &le) {
		return nil, layout, flags.Usagef("serve: %v", err)
	}
	if err != nil {
		return nil, layout, fmt.Errorf("serve: %w", err)
	}
	return s, layout, nil
}

// checkAFXDP checks --afxdp_iface and --afxdp together; with --afxdp
// off, the interface carries nothing of the task's.
func (f *serveFlags) checkAFXDP() error {
	switch {
	case f.afxdp == flags.AFXDPOff:
		f.iface = ""
		return nil
	case f.afxdp == flags.AFXDPOn && f.iface == "":
		return flags.Usagef("serve: --afxdp on needs --afxdp_iface, the interface AF_XDP runs on")
	}
	return flags.CheckIface("serve", f.iface)
}

// serve starts the task, says what it serves and over which paths, reports
// what it does every --report, and returns when ctx ends.
func (f *serveFlags) serve(ctx context.Context, s *tasks.Server, layout tasks.Layout) error {
	stdout := f.stdout
	logger := logline.New(os.Stderr, "starwire: serve: ")
	var fallback string
	switch {
	case !layout.Protocol.UsesStar() && f.afxdp == flags.AFXDPOn:
		return flags.Usagef("serve: --afxdp on: protocol %s has no starwire worker service for AF_XDP to carry", layout.Protocol)
	case !layout.Protocol.UsesStar():
	case f.afxdp == flags.AFXDPOff:
		fallback = "--afxdp off"
	case f.iface == "":
		fallback = flags.AFXDPFallback(flags.NoIfaceGiven)
	default:
		err := s.ServeAFXDP(f.iface)
		switch {
		case errors.Is(err, link.ErrUnavailable) && f.afxdp == flags.AFXDPOn:
			return fmt.Errorf("serve: --afxdp on: AF_XDP on %s unavailable: %w%s", f.iface, err, queueHint(err))
		case errors.Is(err, link.ErrUnavailable):
			fallback = "AF_XDP on " + f.iface + " unavailable: " + err.Error() + queueHint(err)
		case err != nil:
			return fmt.Errorf("serve: %w", err)
		}
	}
	if err := s.Start(layout, logger); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if err := f.priv.drop(s, stdout); err != nil {
		return err
	}
	if w := s.Reactors.Warning(); w != "" {
		fmt.Fprintf(os.Stderr, "starwire: serve: warning: %s\n", w)
	}
	path := s.PeerPath()
	if fallback != "" {
		path += " (fallback: " + fallback + ")"
	}
	fmt.Fprintf(stdout, "%s serving: %s; protocol %s; peer calls over %s; cluster %s%s\n",
		s.Task(), serviceAddrs(s), layout.Protocol, path, layout.Cluster, flags.TLSNote(layout))
	f.reportUntilDone(ctx, s)
	calls, bytes := s.PeerStats()
	fmt.Fprintf(stdout, "%s stopping: %d calls to peers (%.1f MB) over %s\n", s.Task(), calls, float64(bytes)/1e6, s.PeerPath())
	for _, st := range s.PeerPathTotals() {
		fmt.Fprintf(stdout, "  to %s per call (%s): AF_XDP %d calls, %.1f MB; TCP %d calls, %.1f MB; sizes over AF_XDP now: %s\n",
			st.Peer, st.Policy, st.AFXDPCalls, float64(st.AFXDPBytes)/1e6, st.TCPCalls, float64(st.TCPBytes)/1e6, st.AFXDPSizes)
	}
	return nil
}

// queueHint says what to do when a queue would not bind: a veth made
// without a queue count lists more queues than it uses.
func queueHint(err error) string {
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), " queue ") {
		return ""
	}
	return " (the device lists a queue it does not use: make veths with numrxqueues 1 numtxqueues 1, or set the channels with ethtool -L)"
}

// serviceAddrs describes what a task serves where.
func serviceAddrs(s *tasks.Server) string {
	out := "grpc " + s.GRPCAddr
	if s.StarAddr == "" {
		return out
	}
	out += ", starwire " + s.StarAddr + " over " + s.NetName()
	if s.Reactors.N > 0 {
		out += ", reactors " + s.Reactors.String()
	}
	return out
}

// reportUntilDone prints, every --report while the task is working, what it
// has done since the last line.
func (f *serveFlags) reportUntilDone(ctx context.Context, s *tasks.Server) {
	if f.report <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(f.report)
	defer t.Stop()
	var lastCalls, lastBytes int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		calls, bytes := s.PeerStats()
		if calls == lastCalls {
			continue // idle: nothing to say
		}
		fmt.Fprintf(f.stdout, "%s: %d calls to peers (%.1f MB) over %s in the last %v; %d in all\n",
			s.Task(), calls-lastCalls, float64(bytes-lastBytes)/1e6, s.PeerPath(), f.report, calls)
		lastCalls, lastBytes = calls, bytes
	}
}

// orEmpty returns prefix+s, or "" when s is empty.
func orEmpty(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
