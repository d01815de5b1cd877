// Command soak runs starwire under a mixed load with faults for a long
// while, and fails on any lost, corrupted or hung call. Small and
// multi-MiB calls go both ways on one connection, with cancellations and
// short deadlines, beside a hostile peer, while the server process is
// killed (SIGKILL) or restarted; over TCP on loopback and, where the
// machine allows, over AF_XDP between two network namespaces. It prints
// per segment and in total the calls, bytes verified, failures by kind,
// the longest overrun past a deadline, the packet path's retransmissions
// and the server's memory high-water mark.
//
//	go run ./bench/cmd/soak -duration 10m   # or: make soak
//
// The servers are this program run again as children (stress.Child).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/bench"
	"github.com/starwire/starwire/bench/stress"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// afxdpPort is the UDP port of the packet transport in the namespaces.
const afxdpPort = 7730

func main() {
	tcp.SetSharedReactors(cluster.CoreNumber()) // SEASTAR_CORE_NUMBER sizes the TCP reactors, children's too
	stress.Child{Listen: listen}.Main()
	duration := flag.Duration("duration", 10*time.Minute, "how long to run")
	segment := flag.Duration("segment", time.Minute, "length of one segment (one transport, at most one fault)")
	useXDP := flag.String("afxdp", "auto", "AF_XDP path: auto (when the machine allows), on (fail without it) or off")
	hang := flag.Duration("hang", time.Second, "a call returning this long after its deadline counts as hung")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of sizes, ops, data and faults")
	flag.Parse()
	log.SetFlags(log.Ltime)
	os.Exit(run(*duration, *segment, *useXDP, *hang, *seed))
}

// listen opens a child server's listener for "tcp:ADDR" or "afxdp:LINK:PORT".
func listen(spec string) (rpc.Listener, error) {
	kind, rest, _ := strings.Cut(spec, ":")
	switch kind {
	case "tcp":
		return (&tcp.Transport{}).Listen(rest)
	case "afxdp":
		link, p, _ := strings.Cut(rest, ":")
		port, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("soak: spec %q: %w", spec, err)
		}
		g, err := openXDP(link, uint16(port))
		if err != nil {
			return nil, err
		}
		return afxdprpc.Transport(g).Listen("")
	}
	return nil, fmt.Errorf("soak: unknown listen spec %q", spec)
}

func openXDP(ifname string, port uint16) (*afxdp.Group, error) {
	o, err := afxdp.Open(ifname, port, afxdp.Options{Ticket: bench.PacketTicket}, link.XSKOptions{})
	if err != nil {
		return nil, err
	}
	if o.Path != netpath.AFXDP {
		o.Group.Close()
		return nil, fmt.Errorf("soak: no AF_XDP on %s: %v", ifname, o.Fallback)
	}
	return o.Group, nil
}

// target is one transport under test: a server process and a client.
type target struct {
	name   string
	cmd    func() (*stress.Proc, error) // starts a server on the same address each time
	proc   *stress.Proc
	client *rpc.Client
	opts   rpc.ClientOptions
	group  *afxdp.Group // the client's packet transport, when AF_XDP
	hwm    int64        // the servers' memory high-water mark
}

// restart ends the server (killed, or closed as a clean shutdown would)
// and starts another on the same address.
func (t *target) restart(kill bool) error {
	t.noteMem()
	if kill {
		t.proc.Kill()
	} else if err := t.proc.Close(); err != nil {
		log.Printf("%s: server: %v", t.name, err)
	}
	p, err := t.cmd()
	if err != nil {
		return err
	}
	t.proc = p
	return nil
}

// reset replaces a server and a client that calls hung on with new ones,
// so the run goes on and shows whether it happens again.
func (t *target) reset() error {
	t.client.Close()
	if err := t.restart(true); err != nil {
		return err
	}
	t.client = rpc.NewClient(t.proc.Addr, t.opts)
	return nil
}

func (t *target) noteMem() {
	if m, err := t.proc.Mem(); err == nil {
		t.hwm = max(t.hwm, m.HWM)
	}
}

func run(duration, segment time.Duration, useXDP string, hang time.Duration, seed uint64) int {
	targets, cleanup, err := setUp(useXDP)
	defer cleanup()
	if err != nil {
		log.Print(err)
		return 2
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	total := &totals{codes: make(map[wire.Code]int64)}
	var rows []*stress.Report
	end := time.Now().Add(duration)
	for i := 0; time.Now().Before(end); i++ {
		t := targets[i%len(targets)]
		seg := min(segment, time.Until(end))
		fault := []string{"none", "kill -9", "restart"}[i%3]
		rs, err := runSegment(t, seg, fault, hang, rng.Uint64())
		if err != nil {
			log.Printf("%s: %v", t.name, err)
			total.broken++
		}
		for _, r := range rs {
			r.Name = fmt.Sprintf("%d %s %s (%s)", i, t.name, r.Name, fault)
			total.add(r, hang)
		}
		rows = append(rows, rs...)
		stress.FormatReports(os.Stdout, rs...)
	}
	fmt.Println()
	stress.FormatReports(os.Stdout, rows...)
	for _, t := range targets {
		t.noteMem()
		fmt.Printf("%s: server memory high-water %s\n", t.name, stress.MiB(t.hwm))
		if t.group != nil {
			st := t.group.Stats()
			fmt.Printf("%s: client packets sent %d, resent %d, duplicates received %d, received %d\n",
				t.name, st.Sent, st.Resent, st.Duplicates, st.Received)
		}
	}
	return total.print(seed)
}

// setUp starts the TCP target and, when asked and possible, the AF_XDP one.
func setUp(useXDP string) (ts []*target, cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	tt := &target{name: "tcp", opts: rpc.ClientOptions{Transport: &tcp.Transport{}}}
	addr := "127.0.0.1:0"
	tt.cmd = func() (*stress.Proc, error) {
		cmd, err := stress.Command("tcp:" + addr)
		if err != nil {
			return nil, err
		}
		p, err := stress.Start(cmd, os.Stderr)
		if err == nil {
			addr = p.Addr // restarts listen where the first server did
		}
		return p, err
	}
	if tt.proc, err = tt.cmd(); err != nil {
		return nil, cleanup, err
	}
	tt.client = rpc.NewClient(addr, tt.opts)
	undo = append(undo, func() { tt.client.Close(); tt.proc.Close() })
	ts = append(ts, tt)
	if useXDP == "off" {
		return ts, cleanup, nil
	}
	x, undoX, err := setUpXDP()
	if err != nil {
		if useXDP == "on" {
			return ts, cleanup, err
		}
		log.Printf("afxdp: left out: %v", err)
		return ts, cleanup, nil
	}
	undo = append(undo, undoX)
	return append(ts, x), cleanup, nil
}

// setUpXDP makes two namespaces joined by a veth pair, a server in one and
// the client's packet transport in the other.
func setUpXDP() (*target, func(), error) {
	pair, err := netns.New(netns.Options{})
	if err != nil {
		return nil, func() {}, fmt.Errorf("namespaces: %w", err)
	}
	t := &target{name: "afxdp"}
	t.cmd = func() (*stress.Proc, error) {
		cmd, err := stress.CommandIn(pair.B.NS, fmt.Sprintf("afxdp:%s:%d", pair.B.Link, afxdpPort))
		if err != nil {
			return nil, err
		}
		return stress.Start(cmd, os.Stderr)
	}
	if t.proc, err = t.cmd(); err != nil {
		pair.Close()
		return nil, func() {}, err
	}
	if err := pair.A.Do(func() error {
		var err error
		t.group, err = openXDP(pair.A.Link, afxdpPort)
		return err
	}); err != nil {
		t.proc.Close()
		pair.Close()
		return nil, func() {}, err
	}
	t.opts = rpc.ClientOptions{Transport: afxdprpc.Transport(t.group)}
	t.client = rpc.NewClient(t.proc.Addr, t.opts)
	return t, func() { t.client.Close(); t.group.Close(); t.proc.Close(); pair.Close() }, nil
}

// runSegment runs the mixed load on t for d with one fault halfway, and a
// hostile peer beside it on TCP.
func runSegment(t *target, d time.Duration, fault string, hang time.Duration, seed uint64) ([]*stress.Report, error) {
	bulk := stress.Workload{Name: "bulk", Callers: 8, MinSize: 64, MaxSize: 16 << 20,
		Ops: []stress.Op{stress.OpEcho, stress.OpGen, stress.OpEchoInline}, Deadline: 10 * time.Second,
		Short: 0.25, ShortMin: 5 * time.Millisecond, ShortMax: time.Second, Cancel: 0.1, Duration: d, Seed: seed}
	small := stress.Workload{Name: "small", Callers: 8, MinSize: 64, MaxSize: 4 << 10,
		Ops: []stress.Op{stress.OpEchoInline, stress.OpEcho, stress.OpGen, stress.OpSleep}, SleepMax: 50 * time.Millisecond,
		Deadline: 2 * time.Second, Short: 0.1, ShortMin: time.Millisecond, ShortMax: 20 * time.Millisecond,
		Cancel: 0.05, Duration: d, Seed: seed + 1}
	ctx, cancel := context.WithTimeout(context.Background(), d+bulk.Deadline+hang+5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var faultErr error
	if fault != "none" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait(ctx, d/2)
			faultErr = t.restart(fault == "kill -9")
		}()
	}
	if t.name == "tcp" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			attackFor(ctx, t, d, seed)
		}()
	}
	rs := make([]*stress.Report, 2)
	for i, w := range []stress.Workload{bulk, small} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs[i] = w.Run(ctx, t.client)
		}()
	}
	wg.Wait()
	t.noteMem()
	hung := 0
	for _, r := range rs {
		hung += r.Hung
	}
	if hung > 0 {
		stress.DumpAll(os.Stderr, t.proc, t.name)
		if err := t.reset(); err != nil {
			return rs, fmt.Errorf("%d calls hung (goroutines dumped); new server: %w", hung, err)
		}
		return rs, fmt.Errorf("%d calls hung; goroutines dumped, server and client replaced", hung)
	}
	return rs, faultErr
}

// attackFor runs the hostile peers one after another against t's server
// for d. The server may be restarted meanwhile: an attack that cannot
// connect waits for the next.
func attackFor(ctx context.Context, t *target, d time.Duration, seed uint64) {
	attacks := []stress.Attack{
		stress.Claim("claim 1 GiB", stress.ClaimPayload(stress.MethodEcho.ID, 1<<30), 1<<20),
		stress.Claim("claim 64 MiB meta", stress.ClaimMeta(stress.MethodEcho.ID, 64<<20), 1<<20),
		stress.NoRead(24, 16<<20),
		stress.HalfFrames(seed),
		stress.Random(seed),
	}
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
		actx, cancel := context.WithTimeout(ctx, min(5*time.Second, time.Until(end)))
		a := attacks[i%len(attacks)]
		if _, err := a.Run(actx, t.proc.Addr); err != nil {
			wait(actx, time.Second)
		}
		cancel()
	}
}

// wait waits for d or for ctx to end; it paces faults.
func wait(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// totals sums the reports and decides the exit status.
type totals struct {
	calls, ok, verified, corrupted, hung, lost, late int64
	codes                                            map[wire.Code]int64
	maxOverrun                                       time.Duration
	broken                                           int
	errs                                             []string
}

// expected are the failures a mixed load with faults may see: calls cut by
// their deadline or cancelled, calls in flight when a server went away, and
// calls a server refused for its limits.
var expected = []wire.Code{wire.DeadlineExceeded, wire.Cancelled, wire.Unavailable, wire.ResourceExhausted}

func (t *totals) add(r *stress.Report, hang time.Duration) {
	t.calls += r.Calls
	t.ok += r.OK
	t.verified += r.BytesVerified
	t.corrupted += r.Corrupted
	t.hung += int64(r.Hung)
	t.lost += r.Failed(expected...)
	for c, n := range r.Codes {
		t.codes[c] += n
	}
	if r.MaxOverrun > hang {
		t.late++
	}
	t.maxOverrun = max(t.maxOverrun, r.MaxOverrun)
	t.errs = append(t.errs, r.Errors...)
}

func (t *totals) print(seed uint64) int {
	r := stress.Report{Codes: t.codes}
	fmt.Printf("calls %d, ok %d, bytes verified %s, failures by kind: %s\n", t.calls, t.ok, stress.MiB(t.verified), r.CodeSummary())
	fmt.Printf("longest overrun past a deadline %v\n", t.maxOverrun)
	bad := t.corrupted + t.hung + t.lost + t.late + int64(t.broken)
	if bad == 0 {
		fmt.Println("soak: PASS")
		return 0
	}
	for _, e := range t.errs {
		fmt.Println("  ", e)
	}
	fmt.Printf("soak: FAIL (seed %d): %d corrupted, %d hung, %d lost (unexpected failures), %d segments with a call over the hang bound, %d segments broken\n",
		seed, t.corrupted, t.hung, t.lost, t.late, t.broken)
	return 1
}
