package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/starwire/starwire/internal/cpuclock"
)

// A Workload is what each call of a sweep does.
type Workload string

// The workloads.
const (
	WorkEcho       Workload = "echo"       // a small RPC: Size bytes of metadata each way
	WorkRecvTensor Workload = "recvtensor" // a tensor of Size bytes answers a small request
	WorkFuse       Workload = "fuse"       // FuseKeys tensors of Size bytes answer one request
	WorkPSMix      Workload = "psmix"      // a parameter-server step: a control call, two pulls of Size bytes, a push of Size bytes
)

// Workloads are the workloads a sweep can run.
var Workloads = []Workload{WorkEcho, WorkRecvTensor, WorkFuse, WorkPSMix}

// DefaultSizes are the sizes each workload sweeps by default.
var DefaultSizes = map[Workload][]int{
	WorkEcho:       {64, 1 << 10, 16 << 10, 64 << 10},
	WorkRecvTensor: {4 << 10, 256 << 10, 4 << 20, 64 << 20},
	WorkFuse:       {4 << 10, 64 << 10, 1 << 20},
	WorkPSMix:      {4 << 10, 64 << 10, 256 << 10},
}

// Loop disciplines.
const (
	LoopClosed = "closed" // each caller calls again when its answer arrives
	LoopOpen   = "open"   // calls arrive at a fixed rate whatever the answers take
)

// A Point is one measurement's setting.
type Point struct {
	Protocol    string   `json:"protocol"`
	Workload    Workload `json:"workload"`
	Size        int      `json:"size"`
	Concurrency int      `json:"concurrency"`
	Cores       int      `json:"cores"` // SEASTAR_CORE_NUMBER of the server; 0: its default
	Loop        string   `json:"loop"`
	Rate        float64  `json:"rate,omitempty"` // calls/s, open loop
	// Peers, in a fan-in sweep, is the client connections the calls are
	// spread over (Concurrency is then the callers on all of them).
	Peers int `json:"peers,omitempty"`
}

// A Measurement is what a point measured. Latencies are in microseconds.
type Measurement struct {
	Point
	Calls       int64   `json:"calls"`
	Errors      int64   `json:"errors"`
	Seconds     float64 `json:"seconds"`
	CallsPerSec float64 `json:"calls_per_sec"`
	MBPerSec    float64 `json:"mb_per_sec"` // payload moved, 10⁶ bytes/s
	P50         float64 `json:"p50_us"`
	P90         float64 `json:"p90_us"`
	P99         float64 `json:"p99_us"`
	P999        float64 `json:"p999_us"`
	Max         float64 `json:"max_us"`
	// A fan-in point's server memory (a fresh server process for each
	// point): resident before the point, at most during it, and the growth
	// per peer.
	ServerRSSBase int64   `json:"server_rss_base_bytes,omitempty"`
	ServerRSS     int64   `json:"server_rss_peak_bytes,omitempty"`
	RSSPerPeer    float64 `json:"rss_per_peer_bytes,omitempty"`
	// ServerCPUPerCall is a fan-in point's server CPU time (user and
	// system) per call over the measured window alone, in µs: connecting
	// the peers, warm-up and closing are not in it.
	ServerCPUPerCall float64 `json:"server_cpu_us_per_call,omitempty"`
	// LateP50 and LateP99, in an open loop, are how late the client's
	// callers woke past calls' due times (µs): the client machine's part
	// of the latencies.
	LateP50 float64 `json:"late_p50_us,omitempty"`
	LateP99 float64 `json:"late_p99_us,omitempty"`
	// CPUPerCall is the CPU time (user and system) the client and server
	// processes used over the measured window per call, in µs, in steps
	// of 10 ms in all (/proc): what a job whose CPUs are busy pays per
	// call, polling reactors included, which latency does not show.
	CPUPerCall float64 `json:"cpu_us_per_call,omitempty"`
	// SliceRates, in a sliced measurement (SweepConfig.Slices), are the
	// calls/s of each slice, in the order they ran: slice i of every
	// protocol of a setting ran in the same round.
	SliceRates []float64 `json:"slice_calls_per_sec,omitempty"`
	// AFXDPShare, for a dual contender, is the share of the measured
	// window's calls that went over AF_XDP.
	AFXDPShare float64 `json:"afxdp_share,omitempty"`
	Err        string  `json:"error,omitempty"`
}

// payload is the bytes one call of w moves (both ways for echo and the
// mix), for MB/s.
func payload(w Workload, size int) int64 {
	switch w {
	case WorkEcho:
		return 2 * int64(size)
	case WorkFuse:
		return FuseKeys * int64(size)
	case WorkPSMix:
		return 4 * int64(size)
	}
	return int64(size)
}

// A SpawnRequest says which servers to start.
type SpawnRequest struct {
	Protocols []string
	Cores     int // reactors of the TCP server (SEASTAR_CORE_NUMBER); 0: default
	// XDPIface and XDPPort, for ProtoAFXDP alone: where the server's
	// AF_XDP link goes (see ServeXDP).
	XDPIface string
	XDPPort  uint16
	// InNamespace, when set, runs a function in the network namespace the
	// servers must start in (sockets stay there; a child process started
	// by it lives there).
	InNamespace func(func() error) error
}

// A Spawner starts the servers of a request somewhere (another process, or
// this one) and returns their addresses and how to stop them.
type Spawner func(ctx context.Context, req SpawnRequest) (addrs map[string]string, stop func(), err error)

// InProcess is the Spawner that runs the servers in this process.
func InProcess(_ context.Context, req SpawnRequest) (map[string]string, func(), error) {
	var t *Targets
	serve := func() (err error) {
		if req.XDPIface != "" {
			t, err = ServeXDP(req.XDPIface, req.XDPPort)
		} else {
			t, err = ServeTargets(req.Protocols, req.Cores)
		}
		return err
	}
	var err error
	if req.InNamespace != nil {
		err = req.InNamespace(serve)
	} else {
		err = serve()
	}
	if err != nil {
		return nil, nil, err
	}
	addrs := map[string]string{PIDKey: ownPID}
	for p, a := range t.Addrs {
		addrs[p] = a
	}
	return addrs, func() { t.Close() }, nil
}

// SweepConfig says what a sweep measures.
type SweepConfig struct {
	Protocols   []string
	Workloads   []Workload
	Sizes       map[Workload][]int // nil or missing: DefaultSizes
	Concurrency []int              // calls in flight
	Cores       []int              // SEASTAR_CORE_NUMBER values; 0: the server's default
	Loop        string
	Rate        float64 // open loop: calls/s in all
	Duration    time.Duration
	Warmup      time.Duration
	// Slices, when above 1, measures the protocols of each setting at
	// once, in turns: Slices rounds of Duration/Slices each (closed loop
	// only; see measureSliced).
	Slices int
	Spawn  Spawner // nil: InProcess
	// MaxInflightBytes skips points whose calls in flight would hold more
	// payload than this at once (64 MiB × 256 callers is 16 GiB a side);
	// 0 means 1 GiB.
	MaxInflightBytes int64
	// Progress, when set, is called before each point with how many are
	// done of how many.
	Progress func(done, total int, p Point)
	// Peers, when set, makes the sweep a fan-in sweep: each point spreads
	// its calls over this many client connections, in up to ClientProcs
	// client processes (0: DefaultClientProcs) run by Clients (nil: in
	// this process), at Rate in all (open loop), and reads the server's
	// memory. Concurrency is then the callers in all, at least one a peer.
	Peers       []int
	ClientProcs int
	Clients     ClientRunner
}

// points lists the sweep's points in the order they run: for each server
// setting (cores), each workload, size and concurrency, the protocols in
// turn, so that a change in the machine's load touches them alike.
func (c *SweepConfig) points() []Point {
	var ps []Point
	cores := c.Cores
	if len(cores) == 0 {
		cores = []int{0}
	}
	for _, cores := range cores {
		for _, w := range c.Workloads {
			sizes := c.Sizes[w]
			if len(sizes) == 0 {
				sizes = DefaultSizes[w]
			}
			for _, size := range sizes {
				for _, conc := range c.Concurrency {
					if payload(w, size)*int64(conc) > c.maxInflight() {
						continue
					}
					for _, proto := range c.Protocols {
						ps = append(ps, Point{Protocol: proto, Workload: w, Size: size, Concurrency: conc, Cores: cores, Loop: c.Loop, Rate: c.Rate})
					}
				}
			}
		}
	}
	return ps
}

func (c *SweepConfig) maxInflight() int64 {
	if c.MaxInflightBytes > 0 {
		return c.MaxInflightBytes
	}
	return 1 << 30
}

func (c *SweepConfig) check() error {
	switch {
	case len(c.Protocols) == 0 || len(c.Workloads) == 0 || len(c.Concurrency) == 0:
		return errors.New("bench: a sweep needs protocols, workloads and concurrency values")
	case c.Loop != LoopClosed && c.Loop != LoopOpen:
		return fmt.Errorf("bench: loop %q, want %q or %q", c.Loop, LoopClosed, LoopOpen)
	case c.Loop == LoopOpen && c.Rate <= 0:
		return errors.New("bench: an open loop needs a rate (calls/s)")
	case c.Duration <= 0:
		return errors.New("bench: a sweep needs a duration per point")
	case c.Slices > 1 && (c.Loop != LoopClosed || len(c.Peers) > 0):
		return errors.New("bench: sliced points run a closed loop, not a fan-in sweep")
	case c.Slices > 1 && c.Duration/time.Duration(c.Slices) < time.Millisecond:
		return fmt.Errorf("bench: %d slices of a %v point are shorter than 1ms", c.Slices, c.Duration)
	}
	for _, n := range c.Concurrency {
		if n < 1 || n > 4096 {
			return fmt.Errorf("bench: concurrency %d, want 1 to 4096", n)
		}
	}
	for _, n := range c.Peers {
		if n < 1 || n > 10000 {
			return fmt.Errorf("bench: peers %d, want 1 to 10000", n)
		}
	}
	if len(c.Peers) > 0 && c.Loop != LoopOpen {
		return errors.New("bench: a fan-in sweep (peers) runs an open loop at a rate")
	}
	return nil
}

// RunSweep measures every point of cfg. A point that cannot run (an
// unavailable protocol, a failed call) is reported with its error; the
// sweep goes on.
func RunSweep(ctx context.Context, cfg SweepConfig) ([]Measurement, error) {
	if len(cfg.Cores) == 0 {
		cfg.Cores = []int{0}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	spawn := cfg.Spawn
	if spawn == nil {
		spawn = InProcess
	}
	if len(cfg.Peers) > 0 {
		return runPeersSweep(ctx, cfg, spawn)
	}
	points := cfg.points()
	var runnable []string
	unavailable := map[string]error{}
	var xnet *xdpNet
	for _, p := range cfg.Protocols {
		err := Available(p)
		if overVeth(p) && err == nil && xnet == nil {
			if xnet, err = newXDPNet(); err == nil {
				defer xnet.Close()
			}
		}
		if overVeth(p) && err == nil {
			continue // served apart, on the veth pair
		}
		if err != nil {
			unavailable[p] = err
		} else {
			runnable = append(runnable, p)
		}
	}
	var out []Measurement
	for i := 0; i < len(points); {
		cores := points[i].Cores
		// The servers of one cores value serve all of its points.
		addrs, stop, err := spawn(ctx, SpawnRequest{Protocols: runnable, Cores: cores})
		if err != nil {
			return out, err
		}
		if xnet != nil {
			xaddrs, xstop, err := spawn(ctx, xnet.request(cores))
			if err != nil {
				stop()
				return out, err
			}
			for p, a := range xaddrs {
				if overVeth(p) {
					addrs[p] = a
				}
			}
			addrs[xdpPIDKey] = xaddrs[PIDKey]
			stop = func(a, b func()) func() { return func() { a(); b() } }(stop, xstop)
		}
		for i < len(points) && points[i].Cores == cores && cfg.Slices > 1 {
			j := i + 1
			for j < len(points) && sameSetting(points[i], points[j]) {
				j++
			}
			if cfg.Progress != nil {
				cfg.Progress(i, len(points), points[i])
			}
			if ctx.Err() != nil {
				stop()
				return out, ctx.Err()
			}
			out = append(out, measureSliced(ctx, points[i:j], addrs, cfg, xnet, unavailable)...)
			i = j
		}
		for ; i < len(points) && points[i].Cores == cores; i++ {
			p := points[i]
			if cfg.Progress != nil {
				cfg.Progress(i, len(points), p)
			}
			if ctx.Err() != nil {
				stop()
				return out, ctx.Err()
			}
			if err := unavailable[p.Protocol]; err != nil {
				out = append(out, Measurement{Point: p, Err: err.Error()})
				continue
			}
			pid := addrs[PIDKey]
			if overVeth(p.Protocol) {
				pid = addrs[xdpPIDKey]
			}
			out = append(out, measure(ctx, p, addrs[p.Protocol], pid, cfg, xnet))
		}
		stop()
	}
	if cfg.Progress != nil {
		cfg.Progress(len(points), len(points), Point{})
	}
	return out, nil
}

// Available reports why protocol p cannot run here, nil when it may,
// without starting anything (AF_XDP may still turn out unavailable when
// the sweep makes its veth pair).
func Available(p string) error {
	switch p {
	case ProtoGRPC, ProtoTCP, ProtoUDP:
		return nil
	case ProtoAFXDP, ProtoDualAuto, ProtoDualTCP, ProtoDualAFXDP:
		if os.Geteuid() != 0 {
			return fmt.Errorf("bench: %s needs root (network namespaces, AF_XDP sockets): %w", p, ErrUnavailable)
		}
		return nil
	}
	return fmt.Errorf("bench: unknown protocol %q (want %s)", p, strings.Join(append(slices.Clone(Protocols), DualProtocols...), ", "))
}

// sameSetting reports whether points a and b differ at most in protocol.
func sameSetting(a, b Point) bool {
	a.Protocol = b.Protocol
	return a == b
}

// xdpPIDKey keys the veth server's process id among a sweep's addresses.
const xdpPIDKey = "xdp-pid"

// measure runs one point against the server at addr, run by process pid: a
// connection, one caller per call in flight, a warm-up, then the
// measurement.
func measure(ctx context.Context, p Point, addr, pid string, cfg SweepConfig, xnet *xdpNet) Measurement {
	m := Measurement{Point: p}
	var c conn
	var err error
	if overVeth(p.Protocol) {
		c, err = xnet.dial(p.Protocol, addr)
	} else {
		c, err = dial(p.Protocol, addr)
	}
	if err != nil {
		m.Err = err.Error()
		return m
	}
	defer c.Close()
	callers := make([]caller, p.Concurrency)
	for i := range callers {
		if callers[i], err = c.caller(p.Workload, p.Size); err != nil {
			m.Err = err.Error()
			return m
		}
	}
	if cfg.Warmup > 0 {
		if r := driveClosed(ctx, callers, cfg.Warmup); r.firstErr != nil {
			m.Err = "warm-up: " + r.firstErr.Error()
			return m
		}
	}
	pc, _ := c.(pathCounter)
	var before [2]uint64
	if pc != nil {
		var open bool
		if before[0], before[1], open = awaitPacketPath(ctx, callers, pc, cfg.Warmup); !open {
			m.Err = "the packet path did not open during the warm-up"
			return m
		}
	}
	server, _ := strconv.Atoi(pid)
	if server == os.Getpid() {
		server = 0 // in this process: counted as its own
	}
	cpu0, cpuErr := cpuclock.SelfAnd(server)
	var r driveResult
	if p.Loop == LoopOpen {
		r = driveOpen(ctx, callers, cfg.Duration, p.Rate)
	} else {
		r = driveClosed(ctx, callers, cfg.Duration)
	}
	cpu1, err := cpuclock.SelfAnd(server)
	m.Calls, m.Errors, m.Seconds = r.calls, r.errors, r.elapsed.Seconds()
	if cpuErr == nil && err == nil && m.Calls > 0 {
		m.CPUPerCall = float64(cpu1.Sub(cpu0).Total()) / 1e3 / float64(m.Calls)
	}
	if pc != nil {
		tcp, bypass, _ := pc.pathCalls()
		tcp, bypass = tcp-before[0], bypass-before[1]
		m.AFXDPShare = float64(bypass) / float64(max(tcp+bypass, 1))
	}
	if r.firstErr != nil {
		m.Err = r.firstErr.Error()
	}
	if m.Seconds > 0 {
		m.CallsPerSec = float64(m.Calls) / m.Seconds
		m.MBPerSec = float64(m.Calls*payload(p.Workload, p.Size)) / 1e6 / m.Seconds
	}
	us := func(q float64) float64 { return float64(r.hist.ValueAtQuantile(q)) / 1e3 }
	m.P50, m.P90, m.P99, m.P999 = us(50), us(90), us(99), us(99.9)
	m.Max = float64(r.hist.Max()) / 1e3
	if r.late != nil {
		m.LateP50, m.LateP99 = float64(r.late.ValueAtQuantile(50))/1e3, float64(r.late.ValueAtQuantile(99))/1e3
	}
	return m
}
