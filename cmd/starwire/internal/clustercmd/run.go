package clustercmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/internal/vethnet"
)

// trainPaths are what "cluster run" trains over: the tasks' calls to
// each other over AF_XDP on the hosts' links, and over TCP.
var trainPaths = []string{"afxdp", "tcp"}

// run builds a cluster, trains on it over each path, reports, and
// removes it whatever happens, a signal included.
func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	var s shapeFlags
	var paths string
	trainArgs := []string{}
	if i := slices.Index(args, "--"); i >= 0 {
		args, trainArgs = args[:i], args[i+1:]
	}
	fs := flag.NewFlagSet("cluster run", flag.ContinueOnError)
	s.register(fs, "run"+strconv.Itoa(os.Getpid()))
	fs.StringVar(&paths, "paths", strings.Join(trainPaths, ","), `what carries the tasks' calls to each other, one training run each: "afxdp" (AF_XDP on each host's link), "tcp"`)
	if err := flags.Parse(fs, args, stdout, nil); err != nil {
		return err
	}
	if err := s.check("cluster run"); err != nil {
		return err
	}
	var ps []string
	for _, p := range strings.Split(paths, ",") {
		if !slices.Contains(trainPaths, p) || slices.Contains(ps, p) {
			return flags.Usagef("cluster run: --paths %q: want afxdp, tcp or both, once each", paths)
		}
		if p == "afxdp" && s.protocol == "grpc" {
			return flags.Usagef("cluster run: --paths afxdp needs --protocol grpc+seastar")
		}
		ps = append(ps, p)
	}
	sweepAbandoned(s.stateDir, stdout)
	c, err := buildCluster(s, os.Getpid())
	if err != nil {
		return fmt.Errorf("cluster run: %w", err)
	}
	defer func() {
		nss, _ := c.namespaces()
		if terr := c.teardown(); terr != nil {
			err = errors.Join(err, fmt.Errorf("cluster run: removing cluster %s: %w", c.Name, terr))
			return
		}
		fmt.Fprintf(stdout, "removed cluster %s: namespaces %s, with their links and bridge\n", c.Name, strings.Join(nss, " "))
	}()
	c.printHosts(stdout)
	var failed []string
	for _, p := range ps {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := c.trainOver(ctx, p, trainArgs)
		if err != nil {
			return fmt.Errorf("cluster run: over %s: %w", p, err)
		}
		r.print(stdout)
		if r.problem != "" {
			failed = append(failed, p+": "+r.problem)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("cluster run: %s", strings.Join(failed, "; "))
	}
	return nil
}

// namespaces lists the cluster's namespaces that exist.
func (c *testCluster) namespaces() ([]string, error) {
	if c.seg == nil {
		return nil, nil
	}
	var out []string
	for _, h := range c.seg.Hosts {
		out = append(out, h.NS)
	}
	return append(out, vethnet.NSName(c.Name, "switch")), nil
}

// A pathResult is what one training run over a path did.
type pathResult struct {
	path    string
	summary []string // train's summary lines
	tasks   []taskResult
	problem string // why the run did not do what was asked, or ""
}

// A taskResult is what one task said and its host's link counted.
type taskResult struct {
	host           host
	calls          int64
	mb             float64
	over           string
	rxBytes, txB   uint64
	rxPkts, txPkts uint64
	// perPath sums what the task's dual connections said they carried
	// over each path; empty without them.
	perPath string
}

// pathLine is one of serve's lines after the stopping line: what a dual
// connection to one peer carried over each path.
var pathLine = regexp.MustCompile(`(?m)^  to \S+ per call \(([^)]*)\): AF_XDP (\d+) calls, ([0-9.]+) MB; TCP (\d+) calls, ([0-9.]+) MB`)

// perPath sums the path lines of a task's log.
func perPath(log string) string {
	var policy string
	var xdpCalls, tcpCalls int64
	var xdpMB, tcpMB float64
	for _, m := range pathLine.FindAllStringSubmatch(log, -1) {
		policy = m[1]
		n, _ := strconv.ParseInt(m[2], 10, 64)
		mb, _ := strconv.ParseFloat(m[3], 64)
		xdpCalls, xdpMB = xdpCalls+n, xdpMB+mb
		n, _ = strconv.ParseInt(m[4], 10, 64)
		mb, _ = strconv.ParseFloat(m[5], 64)
		tcpCalls, tcpMB = tcpCalls+n, tcpMB+mb
	}
	if policy == "" {
		return ""
	}
	return fmt.Sprintf("per call (%s): AF_XDP %d calls, %.1f MB; TCP %d calls, %.1f MB", policy, xdpCalls, xdpMB, tcpCalls, tcpMB)
}

// stoppingLine is serve's last line: its calls to its peers and their path.
var stoppingLine = regexp.MustCompile(`(?m)^\S+ stopping: (\d+) calls to peers \(([0-9.]+) MB\) over (.*)$`)

// trainOver starts the tasks serving over path, trains from the chief's
// host, stops the tasks and collects what each did.
func (c *testCluster) trainOver(ctx context.Context, path string, trainArgs []string) (_ *pathResult, err error) {
	r := &pathResult{path: path}
	before := c.linkStats()
	defer func() {
		if serr := c.stopTasks(); err == nil && serr != nil {
			err = serr
		}
	}()
	if err := c.start(ctx, pathMode(path), false); err != nil {
		return nil, err
	}
	if path == "afxdp" {
		for _, t := range c.tasks {
			if why := t.fallback(); why != "" {
				r.problem = fmt.Sprintf("%s fell back to TCP: %s", t.host.task(), why)
			}
		}
	}
	out, err := c.train(ctx, path, trainArgs)
	if err != nil {
		return nil, err
	}
	r.summary = summaryLines(out)
	tasks := c.tasks
	if err := c.stopTasks(); err != nil {
		return nil, err
	}
	after := c.linkStats()
	for _, t := range tasks {
		tr := taskResult{host: t.host}
		data, _ := os.ReadFile(t.log)
		m := stoppingLine.FindStringSubmatch(string(data))
		if m == nil {
			return nil, fmt.Errorf("%s did not say what it did: %s", t.host.task(), t.tail())
		}
		tr.calls, _ = strconv.ParseInt(m[1], 10, 64)
		tr.mb, _ = strconv.ParseFloat(m[2], 64)
		tr.over = m[3]
		tr.perPath = perPath(string(data))
		b, a := before[t.host.Name], after[t.host.Name]
		tr.rxBytes, tr.txB = a.RxBytes-b.RxBytes, a.TxBytes-b.TxBytes
		tr.rxPkts, tr.txPkts = a.RxPackets-b.RxPackets, a.TxPackets-b.TxPackets
		if path == "afxdp" && t.host.Job == "worker" && (tr.calls == 0 || !strings.HasPrefix(tr.over, "AF_XDP")) && r.problem == "" {
			r.problem = fmt.Sprintf("%s made %d calls to peers over %s", t.host.task(), tr.calls, tr.over)
		}
		r.tasks = append(r.tasks, tr)
	}
	return r, nil
}

// train runs "starwire train" in the chief's namespace, as the chief of
// TF_CONFIG, and returns its output; a signal stops it with SIGTERM, so
// that it cleans up too.
func (c *testCluster) train(ctx context.Context, path string, trainArgs []string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	chief := c.hostNamed("chief")
	env, err := c.env(chief)
	if err != nil {
		return "", err
	}
	logPath := c.dir + "/" + chief.Name + "/train-" + path + ".log"
	args := append([]string{"train", "--connect_timeout", "30s"}, trainArgs...)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Dir, cmd.Env = c.dir+"/"+chief.Name, env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	if err := c.seg.Do(chief.Name, cmd.Start); err != nil {
		return "", fmt.Errorf("start train in %s: %w", chief.NS, err)
	}
	err = cmd.Wait()
	os.WriteFile(logPath, []byte(out.String()), 0o644)
	if err != nil {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		return "", fmt.Errorf("train: %v: %s", err, lastLines(out.String(), 4))
	}
	return out.String(), nil
}

// linkStats reads every host's link counters.
func (c *testCluster) linkStats() map[string]netlink.LinkStatistics {
	m := map[string]netlink.LinkStatistics{}
	for _, h := range c.Hosts {
		if st, err := c.seg.LinkStats(h.Name); err == nil {
			m[h.Name] = st
		}
	}
	return m
}

// summaryLines keeps train's summary.
func summaryLines(out string) []string {
	_, sum, ok := strings.Cut(out, "\nsummary:\n")
	if !ok {
		return nil
	}
	return strings.Split(strings.TrimRight(sum, "\n"), "\n")
}

// lastLines returns s's last n lines on one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// print reports the run: train's summary, then each task's path and
// traffic.
func (r *pathResult) print(w io.Writer) {
	what := map[string]string{"afxdp": "AF_XDP (serve --afxdp_iface eth0)", "tcp": "TCP (serve without --afxdp_iface)"}[r.path]
	fmt.Fprintf(w, "\ntasks' calls to each other over %s; starwire train as the chief:\n", what)
	for _, l := range r.summary {
		fmt.Fprintf(w, "  %s\n", strings.TrimSpace(l))
	}
	fmt.Fprintf(w, "  %-30s %-8s %-12s %7s %7s  %-32s %s\n", "task", "host", "address", "calls", "MB", "peer calls over", "link rx/tx (packets, MB)")
	for _, t := range r.tasks {
		fmt.Fprintf(w, "  %-30s %-8s %-12s %7d %7.1f  %-32s %d/%d, %.1f/%.1f\n", t.host.task(), t.host.Name, t.host.Addr,
			t.calls, t.mb, t.over, t.rxPkts, t.txPkts, float64(t.rxBytes)/1e6, float64(t.txB)/1e6)
	}
	for _, t := range r.tasks {
		if t.perPath != "" {
			fmt.Fprintf(w, "  %s %s\n", t.host.task(), t.perPath)
		}
	}
	if r.problem != "" {
		fmt.Fprintf(w, "  NOT AS ASKED: %s\n", r.problem)
	}
}

// pathMode is the --afxdp of the tasks of a run on path: AF_XDP where
// their hosts allow it, or never.
func pathMode(path string) flags.AFXDP {
	if path == "afxdp" {
		return flags.AFXDPAuto
	}
	return flags.AFXDPOff
}
