package main

import (
	"bufio"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
	"github.com/starwire/starwire/wire"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The capacity note's inputs: what one more
// peer costs a parameter server. Each test logs its figure (go test -v
// -run TestCapacity ./cmd/starwire) and fails if it grows past a bound far
// above it.

// capacityChild is set in the process TestCapacitySessionMemory runs in.
const capacityChild = "STARWIRE_CAPACITY_CHILD"

// capacityConns is how many peers the capacity tests connect, all from
// one address: below the servers' default bound per peer host (256).
const capacityConns = 250

// TestCapacityConnMemory: a ps process's resident memory per starwire TCP
// connection that has made a call, measured from outside the process.
func TestCapacityConnMemory(t *testing.T) {
	bin := buildBinary(t)
	grpcAddr, err1 := cluster.FreePort("tcp", "127.0.0.1")
	starAddr, err2 := cluster.FreePort("tcp", "127.0.0.1")
	workerAddr, err3 := cluster.FreePort("tcp", "127.0.0.1")
	if err := errorsJoinAll(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	emap := filepath.Join(dir, "map")
	if err := os.WriteFile(emap, []byte(grpcAddr+"="+starAddr+"\n"+workerAddr+"=127.0.0.1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--job", "ps", "--task", "0", "--cluster", "ps="+grpcAddr+";worker="+workerAddr,
		"--endpoint_map", emap, "--report", "0")
	cmd.Env = append(os.Environ(), "TF_CONFIG=", "SEASTAR_CORE_NUMBER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	for !strings.Contains(sc.Text(), " serving: ") {
		if !sc.Scan() {
			t.Fatalf("serve ended before serving: %v", sc.Err())
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	tr, _, err := tasks.TCPNet{}.Dialer()
	if err != nil {
		t.Fatal(err)
	}
	call := func() *rpc.Client {
		c := rpc.NewClient(starAddr, rpc.ClientOptions{Transport: tr})
		resp := new(healthpb.HealthCheckResponse)
		if err := c.CallProto(ctx, tasks.StarHealth, &healthpb.HealthCheckRequest{}, resp); err != nil {
			t.Fatal(err)
		}
		return c
	}
	warm := call()
	defer warm.Close()
	before := rss(t, cmd.Process.Pid)
	clients := make([]*rpc.Client, 0, capacityConns)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range capacityConns {
		clients = append(clients, call())
	}
	after := rss(t, cmd.Process.Pid)
	per := float64(after-before) / capacityConns
	t.Logf("ps resident memory: %.1f MiB with 1 connection, %.1f MiB with %d: %.1f KiB a connection",
		float64(before)/(1<<20), float64(after)/(1<<20), capacityConns+1, per/1024)
	if per > 1<<20 {
		t.Errorf("%.0f KiB a connection", per/1024)
	}
}

// rss reads process pid's resident set size.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func errorsJoinAll(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestCapacitySessionMemory: the Go heap a packet-path session holds,
// both ends together (the endpoints' session state, windows and the rpc
// connections on them), after one call, over an in-memory link so that
// no kernel memory hides in the figure.
//
// The heap is the whole process's, so the figure is taken in a process of
// its own: earlier tests' connections and pooled buffers, released in the
// background after they end, would otherwise be counted against it.
func TestCapacitySessionMemory(t *testing.T) {
	if os.Getenv(capacityChild) == "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestCapacitySessionMemory$", "-test.v", "-test.count", "1")
		cmd.Env = append(os.Environ(), capacityChild+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in a process of its own:\n%s", out)
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	a := netip.MustParseAddrPort("198.18.255.1:7000")
	b := netip.MustParseAddrPort("198.18.255.2:7000")
	la, lb := link.MemPair(a, b, link.MemOptions{})
	ea, eb := afxdp.NewEndpoint(la, afxdp.Options{Ticket: &testTicket}), afxdp.NewEndpoint(lb, afxdp.Options{Ticket: &testTicket, MaxPeerSessions: 2 * capacityConns})
	defer ea.Close()
	defer eb.Close()
	srv := rpc.NewServer()
	echo := rpc.NewMethod("capacity/Echo")
	srv.Register(echo, func(_ context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta[:0], req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	l, err := afxdprpc.Transport(eb).Listen("")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func() *rpc.Client {
		c := rpc.NewClient(b.String(), rpc.ClientOptions{Transport: afxdprpc.Transport(ea)})
		var reply rpc.Reply
		if err := c.Call(ctx, echo, &rpc.Request{Meta: []byte("x")}, &reply); err != nil {
			t.Fatal(err)
		}
		reply.Release()
		return c
	}
	warm := call()
	defer warm.Close()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	clients := make([]*rpc.Client, 0, capacityConns)
	for range capacityConns {
		clients = append(clients, call())
	}
	after := heap()
	for _, c := range clients {
		c.Close()
	}
	per := float64(after-before) / capacityConns
	t.Logf("packet-path sessions: %.1f MiB of heap for %d, %.1f KiB a session, both ends together", float64(after-before)/(1<<20), capacityConns, per/1024)
	if per > 4<<20 {
		t.Errorf("%.0f KiB a session", per/1024)
	}
}
