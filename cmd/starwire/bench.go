package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/starwire/starwire/bench"
	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/internal/units"
	"github.com/starwire/starwire/rpc/cluster"
)

// benchFlags are the flags of "starwire bench".
type benchFlags struct {
	protocols, workloads, sizes, concurrency, cores, loop, out string
	peers, peersClient                                         string
	clientProcs, slices                                        int
	rate                                                       float64
	duration, warmup                                           time.Duration
	inProcess, smoke, serve                                    bool
	concurrencyGiven                                           bool // --concurrency was on the command line
	xdpIface                                                   string
	xdpPort                                                    int
}

// benchCmd runs a sweep and writes its table and JSON; bench/cmd/charts
// draws the charts, so that this binary links no plotting library.
func benchCmd(ctx context.Context, args []string, stdout io.Writer) error {
	var f benchFlags
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&f.protocols, "protocols", strings.Join(bench.Protocols, ","), "protocols to compare; also "+strings.Join(bench.DualProtocols, ", ")+": one dual connection (TCP and AF_XDP, over a veth pair, as root) choosing per call, on TCP only, on AF_XDP only")
	fs.StringVar(&f.workloads, "workloads", "echo,recvtensor,fuse,psmix", `workloads: "echo" (small RPC), "recvtensor" (a tensor answers), "fuse" (8 tensors answer one call), "psmix" (a parameter-server step: control call, two pulls, one push)`)
	fs.StringVar(&f.sizes, "sizes", "", "sizes to sweep, such as 64,4KiB,16MiB (default: per workload, echo 64B–64KiB, recvtensor 4KiB–64MiB)")
	fs.StringVar(&f.concurrency, "concurrency", "1,16,64,256", "calls in flight to sweep")
	fs.StringVar(&f.cores, "cores", "", "SEASTAR_CORE_NUMBER values of the servers to sweep (default: the variable's)")
	fs.StringVar(&f.loop, "loop", bench.LoopClosed, `"closed" (each caller calls again once answered) or "open" (calls arrive at --rate whatever the answers take)`)
	fs.Float64Var(&f.rate, "rate", 0, "open loop: calls per second, in all")
	fs.DurationVar(&f.duration, "duration", 2*time.Second, "measuring time per point")
	fs.DurationVar(&f.warmup, "warmup", 200*time.Millisecond, "unmeasured calls before each point")
	fs.IntVar(&f.slices, "slices", 1, "above 1: connect a setting's protocols at once and measure them in turns, this many slices of --duration/N each, so that the machine's load falls on all alike (each slice's rate goes into results.json); closed loop only")
	fs.BoolVar(&f.inProcess, "inprocess", false, "run the servers in this process (flatters the figures: the layout users deploy is separate processes)")
	fs.StringVar(&f.out, "out", "bench-results", "directory for results.json")
	fs.BoolVar(&f.smoke, "smoke", false, "a tiny sweep that checks every path works (CI), not a measurement: short points, small sizes, concurrency 1,8 unless --concurrency is given")
	fs.BoolVar(&f.serve, "serve", false, "serve --protocols for a sweep in another process until standard input closes (what bench starts)")
	fs.StringVar(&f.peers, "peers", "", "a fan-in sweep: client connections to spread each point's calls over, such as 1,10,100,1000 (needs --loop open and --rate, the rate in all; --concurrency is then the callers in all, at least one a peer); the table adds the server's resident memory, in all and per peer")
	fs.IntVar(&f.clientProcs, "client_procs", bench.DefaultClientProcs, "with --peers: client processes the peers are spread over, at most")
	fs.StringVar(&f.peersClient, "peers_client", "", "run one client process's share of a fan-in point (a JSON bench.PeersSpec) and print what it measured (what bench starts)")
	fs.StringVar(&f.xdpIface, "afxdp_iface", "", "with --serve: serve starwire over AF_XDP on this interface instead")
	fs.IntVar(&f.xdpPort, "afxdp_port", 7800, "with --afxdp_iface: the UDP port")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) { f.concurrencyGiven = f.concurrencyGiven || fl.Name == "concurrency" })
	if f.peersClient != "" {
		return benchPeersClient(ctx, f.peersClient, stdout)
	}
	protos := splitList(f.protocols)
	if f.serve {
		return benchServe(protos, f.xdpIface, f.xdpPort, stdout)
	}
	cfg, err := f.config(protos)
	if err != nil {
		return err
	}
	if !f.inProcess {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		cfg.Spawn = bench.ProcessSpawner(func(req bench.SpawnRequest) *exec.Cmd {
			args := []string{"bench", "--serve", "--protocols", strings.Join(req.Protocols, ",")}
			if req.XDPIface != "" {
				args = append(args, "--afxdp_iface", req.XDPIface, "--afxdp_port", strconv.Itoa(int(req.XDPPort)))
			}
			cmd := exec.Command(exe, args...)
			cmd.Env = os.Environ()
			if req.Cores > 0 {
				cmd.Env = append(cmd.Env, cluster.EnvCoreNumber+"="+strconv.Itoa(req.Cores))
			}
			return cmd
		})
		if len(cfg.Peers) > 0 {
			cfg.Clients = peersClients(exe)
		}
	}
	bar := newBenchProgress(stdout)
	cfg.Progress = bar.show
	ms, err := bench.RunSweep(ctx, cfg)
	bar.done()
	if err != nil && len(ms) == 0 {
		return fmt.Errorf("bench: %w", err)
	}
	return f.report(ms, args, stdout)
}

// config turns the flags into a sweep.
func (f *benchFlags) config(protos []string) (bench.SweepConfig, error) {
	cfg := bench.SweepConfig{Protocols: protos, Loop: f.loop, Rate: f.rate, Duration: f.duration, Warmup: f.warmup, Slices: f.slices}
	for _, w := range splitList(f.workloads) {
		cfg.Workloads = append(cfg.Workloads, bench.Workload(w))
		if !containsWorkload(bench.Workloads, bench.Workload(w)) {
			return cfg, flags.Usagef("bench: --workloads: unknown workload %q", w)
		}
	}
	for _, p := range protos {
		if err := bench.Available(p); err != nil && !strings.Contains(err.Error(), "unavailable") {
			return cfg, flags.Usagef("bench: --protocols: %v", err)
		}
	}
	if f.sizes != "" {
		cfg.Sizes = map[bench.Workload][]int{}
		for _, s := range splitList(f.sizes) {
			n, err := bench.ParseSize(s)
			if err != nil {
				return cfg, flags.Usagef("bench: --sizes: %v", err)
			}
			for _, w := range cfg.Workloads {
				cfg.Sizes[w] = append(cfg.Sizes[w], n)
			}
		}
	}
	var err error
	if cfg.Concurrency, err = intList("concurrency", f.concurrency, 1, 4096); err != nil {
		return cfg, err
	}
	if f.cores != "" {
		if cfg.Cores, err = intList("cores", f.cores, 1, 1024); err != nil {
			return cfg, err
		}
	}
	if f.peers != "" {
		if cfg.Peers, err = intList("peers", f.peers, 1, 10000); err != nil {
			return cfg, err
		}
		if f.loop != bench.LoopOpen {
			return cfg, flags.Usagef("bench: --peers needs --loop open and a --rate")
		}
		cfg.ClientProcs = f.clientProcs
	}
	if f.smoke {
		cfg.Sizes = map[bench.Workload][]int{bench.WorkEcho: {64, 4 << 10}, bench.WorkRecvTensor: {4 << 10, 256 << 10},
			bench.WorkFuse: {4 << 10}, bench.WorkPSMix: {4 << 10}}
		if !f.concurrencyGiven {
			cfg.Concurrency = []int{1, 8}
		}
		cfg.Duration, cfg.Warmup = 100*time.Millisecond, 20*time.Millisecond
	}
	switch {
	case f.loop != bench.LoopClosed && f.loop != bench.LoopOpen:
		return cfg, flags.Usagef(`bench: --loop %q, want "closed" or "open"`, f.loop)
	case f.loop == bench.LoopOpen && !(f.rate > 0):
		return cfg, flags.Usagef("bench: --loop open needs --rate calls per second > 0")
	case f.duration <= 0:
		return cfg, flags.Usagef("bench: --duration %v, want > 0", f.duration)
	}
	return cfg, nil
}

// report prints the table and writes the JSON.
func (f *benchFlags) report(ms []bench.Measurement, args []string, stdout io.Writer) error {
	host, _ := os.Hostname()
	layout := "separate processes"
	if f.inProcess {
		layout = "one process"
	}
	r := &bench.Report{
		Date:         time.Now().UTC().Format(time.RFC3339),
		Command:      strings.TrimSpace("starwire bench " + strings.Join(args, " ")),
		Machine:      fmt.Sprintf("%s, %d CPUs", host, numCPU()),
		Layout:       layout,
		Measurements: ms,
	}
	fmt.Fprintf(stdout, "%s; clients and servers in %s; %s loop\n", r.Date, layout, f.loop)
	if err := r.WriteTable(stdout); err != nil {
		return err
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	jsonPath := filepath.Join(f.out, "results.json")
	jf, err := os.Create(jsonPath)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	werr := r.WriteJSON(jf)
	if cerr := jf.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("bench: write %s: %w", jsonPath, werr)
	}
	fmt.Fprintf(stdout, "results: %s\n", jsonPath)
	fmt.Fprintf(stdout, "charts: go run ./bench/cmd/charts %s\n", jsonPath)
	for _, m := range ms {
		if m.Err != "" && !strings.Contains(m.Err, bench.ErrUnavailable.Error()) {
			return fmt.Errorf("bench: %s %s %s: %s", m.Protocol, m.Workload, bench.FormatSize(m.Size), m.Err)
		}
	}
	return nil
}

// benchServe is the server process of a sweep: it serves protos, says
// where, and stops when its standard input closes.
func benchServe(protos []string, xdpIface string, xdpPort int, stdout io.Writer) error {
	cores := 0 // the servers' default
	if r := cluster.SharedReactors(); r.Var != "" {
		cores = r.N
	}
	var t *bench.Targets
	var err error
	if xdpIface != "" {
		if xdpPort <= 0 || xdpPort > 65535 {
			return flags.Usagef("bench: --afxdp_port %d, want 1 to 65535", xdpPort)
		}
		t, err = bench.ServeXDP(xdpIface, uint16(xdpPort))
	} else {
		t, err = bench.ServeTargets(protos, cores)
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer t.Close()
	fmt.Fprintln(stdout, bench.ServingPrefix+bench.FormatAddrs(t.Addrs))
	io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func intList(flagName, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := units.ParseCount(f, lo, hi)
		if err != nil {
			return nil, flags.Usagef("bench: --%s %q, want whole numbers from %d to %d", flagName, f, lo, hi)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, flags.Usagef("bench: --%s is empty", flagName)
	}
	return out, nil
}

func containsWorkload(ws []bench.Workload, w bench.Workload) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

// peersClients runs each client process's share of a fan-in point as
// "exe bench --peers_client SPEC", which prints what it measured.
func peersClients(exe string) bench.ClientRunner {
	return func(ctx context.Context, spec bench.PeersSpec) bench.PeersResult {
		js, err := json.Marshal(spec)
		if err != nil {
			return bench.PeersResult{Err: err.Error()}
		}
		cmd := exec.CommandContext(ctx, exe, "bench", "--peers_client", string(js))
		cmd.Env = os.Environ()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return bench.PeersResult{Err: fmt.Sprintf("client process: %v: %s", err, strings.TrimSpace(stderr.String()))}
		}
		var r bench.PeersResult
		if err := json.Unmarshal(out, &r); err != nil {
			return bench.PeersResult{Err: fmt.Sprintf("client process: %v", err)}
		}
		return r
	}
}

// benchPeersClient is a client process of a fan-in point.
func benchPeersClient(ctx context.Context, specJSON string, stdout io.Writer) error {
	var spec bench.PeersSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return flags.Usagef("bench: --peers_client: %v", err)
	}
	return json.NewEncoder(stdout).Encode(bench.RunPeers(ctx, spec))
}
