package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// listenTask opens the two sockets a grpc+seastar task serves on, on
// loopback port 0, and returns the addresses to register.
func listenTask(t *testing.T) map[string]string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Error(err)
		return nil
	}
	t.Cleanup(func() { l.Close() })
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Error(err)
		return nil
	}
	t.Cleanup(func() { pc.Close() })
	grpc, err1 := AdvertiseAddr("", l.Addr())
	star, err2 := AdvertiseAddr("127.0.0.1", pc.LocalAddr())
	if err := errors.Join(err1, err2); err != nil {
		t.Error(err)
		return nil
	}
	return map[string]string{AddrGRPC: grpc, AddrStar: star}
}

func TestRegistryConcurrentLaunch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "launch") // created by the first Register
	jobs := map[string]int{"ps": 2, "worker": 5}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	type result struct {
		r   Roster
		err error
	}
	waited := make(chan result, 1)
	go func() {
		r, err := Wait(ctx, dir, jobs)
		waited <- result{r, err}
	}()

	var mu sync.Mutex
	want := make(map[string]map[string]string) // task name -> addrs
	var wg sync.WaitGroup
	for job, n := range jobs {
		for task := range n {
			wg.Go(func() {
				time.Sleep(time.Duration(task*7%20) * time.Millisecond) // staggers the launches, as a cluster's tasks start
				addrs := listenTask(t)
				if addrs == nil {
					return
				}
				if err := Register(dir, job, task, addrs); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want[TaskName(job, task)] = addrs
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	res := <-waited
	if res.err != nil {
		t.Fatal(res.err)
	}
	r := res.r
	if r.Cluster.Len() != 7 || r.Endpoints.Len() != 7 || len(r.Addrs) != 2 {
		t.Fatalf("roster has %d tasks, %d endpoints, %d kinds", r.Cluster.Len(), r.Endpoints.Len(), len(r.Addrs))
	}
	for job, n := range jobs {
		for task := range n {
			addrs := want[TaskName(job, task)]
			grpc, err := r.Cluster.Lookup(job, task)
			if err != nil || grpc != addrs[AddrGRPC] {
				t.Errorf("%s: grpc %q, %v; want %q", TaskName(job, task), grpc, err, addrs[AddrGRPC])
			}
			star, err := r.Endpoints.StarAddr(r.Cluster, job, task)
			if err != nil || star != addrs[AddrStar] {
				t.Errorf("%s: star %q, %v; want %q", TaskName(job, task), star, err, addrs[AddrStar])
			}
			if s, _ := r.Addrs[AddrStar].Lookup(job, task); s != star {
				t.Errorf("%s: Addrs[star] %q, want %q", TaskName(job, task), s, star)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
	if len(entries) != 7 {
		t.Errorf("%d files in the registry, want 7", len(entries))
	}
}

func TestWaitClusterTimesOutNamingMissingTask(t *testing.T) {
	dir := t.TempDir()
	for task := range 3 {
		addrs := map[string]string{AddrGRPC: fmt.Sprintf("127.0.0.1:%d", 3000+task)}
		if err := Register(dir, "worker", task, addrs); err != nil {
			t.Fatal(err)
		}
	}
	// Files Wait must ignore: a temporary file, a stranger, a job
	// nobody waits for.
	writeFile(t, filepath.Join(dir, ".worker.3.json.123.tmp"), "partial")
	writeFile(t, filepath.Join(dir, "README"), "launch registry")
	if err := Register(dir, "evaluator", 0, map[string]string{AddrGRPC: "127.0.0.1:4000"}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Wait(ctx, dir, map[string]int{"worker": 4})
	took := time.Since(start)
	if !errors.Is(err, ErrIncomplete) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrIncomplete and DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "1 of 4 tasks not registered: /job:worker/replica:0/task:3") {
		t.Errorf("message does not name the missing task: %v", err)
	}
	if took > 3*time.Second {
		t.Errorf("Wait returned %v after a 300ms deadline", took)
	}

	// The late task arrives: the same wait now completes.
	if err := Register(dir, "worker", 3, map[string]string{AddrGRPC: "127.0.0.1:3003"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := Wait(ctx, dir, map[string]int{"worker": 4})
	if err != nil {
		t.Fatal(err)
	}
	if r.Cluster.String() != "worker=127.0.0.1:3000,127.0.0.1:3001,127.0.0.1:3002,127.0.0.1:3003" || r.Endpoints.Len() != 0 {
		t.Errorf("roster %v, %d endpoints", r.Cluster, r.Endpoints.Len())
	}
}

func TestWaitClusterCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := Wait(ctx, filepath.Join(t.TempDir(), "never"), map[string]int{"ps": 1})
	if !errors.Is(err, ErrIncomplete) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

func TestRegisterReplacesEarlierAddresses(t *testing.T) {
	dir := t.TempDir()
	for _, a := range []string{"127.0.0.1:1111", "127.0.0.1:2222"} {
		if err := Register(dir, "ps", 0, map[string]string{AddrGRPC: a}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := Wait(ctx, dir, map[string]int{"ps": 1})
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := r.Cluster.Lookup("ps", 0); a != "127.0.0.1:2222" {
		t.Errorf("ps 0 at %q, want the later registration", a)
	}
}

// Registrations that cannot become right fail at once, not at the deadline.
func TestWaitClusterFailsFast(t *testing.T) {
	g := func(a string) map[string]string { return map[string]string{AddrGRPC: a} }
	tests := []struct {
		name  string
		setup func(dir string) error
		jobs  map[string]int
		msg   string
	}{
		{"task beyond count", func(dir string) error { return Register(dir, "worker", 2, g("h:1")) },
			map[string]int{"worker": 2}, `/job:worker/replica:0/task:2 registered, but job "worker" has 2 tasks`},
		{"malformed file", func(dir string) error { return os.WriteFile(filepath.Join(dir, "ps.0.json"), []byte("{"), 0o644) },
			map[string]int{"ps": 1}, "ps.0.json: unexpected end of JSON"},
		{"file holds another task", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "ps.0.json"), []byte(`{"job":"ps","task":1,"addrs":{"grpc":"h:1"}}`), 0o644)
		}, map[string]int{"ps": 1}, "ps.0.json: holds /job:ps/replica:0/task:1"},
		{"bad address in file", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "ps.0.json"), []byte(`{"job":"ps","task":0,"addrs":{"grpc":"h"}}`), 0o644)
		}, map[string]int{"ps": 1}, "grpc address: bad host:port"},
		{"no grpc address", func(dir string) error { return Register(dir, "ps", 0, map[string]string{AddrStar: "h:1"}) },
			map[string]int{"ps": 1}, `/job:ps/replica:0/task:0 registered no "grpc" address`},
		{"duplicate address", func(dir string) error {
			return errors.Join(Register(dir, "ps", 0, g("h:1")), Register(dir, "worker", 0, g("h:1")))
		}, map[string]int{"ps": 1, "worker": 1}, "duplicate address h:1"},
		{"duplicate star address", func(dir string) error {
			return errors.Join(Register(dir, "ps", 0, map[string]string{AddrGRPC: "h:1", AddrStar: "h:9"}),
				Register(dir, "ps", 1, map[string]string{AddrGRPC: "h:2", AddrStar: "h:9"}))
		}, map[string]int{"ps": 2}, "duplicate address h:9"},
		{"no jobs", func(string) error { return nil }, map[string]int{}, "no jobs to wait for"},
		{"zero tasks", func(string) error { return nil }, map[string]int{"ps": 0}, "want a positive task count"},
		{"bad job", func(string) error { return nil }, map[string]int{"p s": 1}, "bad job name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tt.setup(dir); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := Wait(ctx, dir, tt.jobs)
			if err == nil || !strings.Contains(err.Error(), tt.msg) || errors.Is(err, ErrIncomplete) {
				t.Fatalf("err = %v, want %q", err, tt.msg)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
}

func TestRegisterRejects(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		job   string
		task  int
		addrs map[string]string
		msg   string
	}{
		{"ps", 0, nil, "no addresses"},
		{"ps", -1, map[string]string{AddrGRPC: "h:1"}, "negative task index"},
		{"9ps", 0, map[string]string{AddrGRPC: "h:1"}, "bad job name"},
		{"../x", 0, map[string]string{AddrGRPC: "h:1"}, "bad job name"},
		{"ps", 0, map[string]string{AddrGRPC: "h:0"}, "grpc address: bad host:port \"h:0\""},
		{"ps", 0, map[string]string{"": "h:1"}, "empty address kind"},
	} {
		err := Register(dir, tt.job, tt.task, tt.addrs)
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Register(%q, %d, %v) = %v, want %q", tt.job, tt.task, tt.addrs, err, tt.msg)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("rejected registrations left %d files", len(entries))
	}
}

func TestFreePort(t *testing.T) {
	for _, network := range []string{"tcp", "udp"} {
		addr, err := FreePort(network, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckAddr(addr); err != nil || !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Fatalf("FreePort(%s) = %q, %v", network, addr, err)
		}
		// The port was free a moment ago; binding it now normally works.
		// Another process may have taken it since (the documented race), so
		// a failure to bind is logged, not failed.
		var c interface{ Close() error }
		if network == "tcp" {
			c, err = net.Listen(network, addr)
		} else {
			c, err = net.ListenPacket(network, addr)
		}
		if err != nil {
			t.Logf("%s port %s taken since: %v", network, addr, err)
			continue
		}
		c.Close()
	}
	if _, err := FreePort("unix", "127.0.0.1"); err == nil {
		t.Error("FreePort(unix) accepted")
	}
}

func TestAdvertiseAddr(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatalf("no host name: %v", err)
	}
	tests := []struct {
		host  string
		bound net.Addr
		want  string
	}{
		{"", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}, "127.0.0.1:4242"},
		{"node7", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}, "node7:4242"},
		{"", &net.TCPAddr{IP: net.IPv6unspecified, Port: 4242}, net.JoinHostPort(host, "4242")},
		{"", &net.UDPAddr{IP: net.IPv4zero, Port: 53}, net.JoinHostPort(host, "53")},
		{"198.18.0.2", &net.UDPAddr{Port: 9}, "198.18.0.2:9"},
	}
	for _, tt := range tests {
		got, err := AdvertiseAddr(tt.host, tt.bound)
		if err != nil || got != tt.want {
			t.Errorf("AdvertiseAddr(%q, %v) = %q, %v; want %q", tt.host, tt.bound, got, err, tt.want)
		}
	}
	if _, err := AdvertiseAddr("", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}); !errors.Is(err, ErrBadAddress) {
		t.Errorf("port 0 advertised: %v", err)
	}
}

// A reader racing with repeated registrations of the same task sees one
// complete registration or the other, never a partial file.
func TestRegisterIsAtomicForReaders(t *testing.T) {
	dir := t.TempDir()
	addrs := []map[string]string{
		{AddrGRPC: "127.0.0.1:1111", AddrStar: "127.0.0.1:2111"},
		{AddrGRPC: "worker-with-a-longer-host-name.cluster.local:1112", AddrStar: "127.0.0.1:2112"},
	}
	if err := Register(dir, "worker", 0, addrs[0]); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 100 {
			if err := Register(dir, "worker", 0, addrs[i%2]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	path := filepath.Join(dir, registryFile("worker", 0))
	for reads := 0; ; reads++ {
		select {
		case <-done:
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("%d files after the writes, want 1", len(entries))
			}
			return
		default:
		}
		reg, err := readRegistration(path)
		if err != nil {
			t.Fatalf("read %d: %v", reads, err)
		}
		if g := reg.Addrs[AddrGRPC]; g != addrs[0][AddrGRPC] && g != addrs[1][AddrGRPC] {
			t.Fatalf("read %d: grpc address %q", reads, g)
		}
	}
}

// Each task of a launch binds port 0, registers what it got, and waits for
// the others; here two tasks of one process stand in for a cluster.
func ExampleWait() {
	dir, err := os.MkdirTemp("", "launch")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	for task := range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println(err)
			return
		}
		defer l.Close()
		addr, _ := AdvertiseAddr("", l.Addr())
		if err := Register(dir, "worker", task, map[string]string{AddrGRPC: addr}); err != nil {
			fmt.Println(err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := Wait(ctx, dir, map[string]int{"worker": 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Cluster.Jobs(), r.Cluster.NumTasks("worker"))
	// Output: [worker] 2
}

// TestDeregister: a stopping task's registration goes, so that a later
// launch in the directory does not take its dead addresses for live ones;
// one replaced by another process stays.
func TestDeregister(t *testing.T) {
	dir := t.TempDir()
	mine := map[string]string{AddrGRPC: "127.0.0.1:1000", AddrStar: "127.0.0.1:1001"}
	if err := Register(dir, "worker", 0, mine); err != nil {
		t.Fatal(err)
	}
	if err := Deregister(dir, "worker", 0, mine); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Wait(ctx, dir, map[string]int{"worker": 1}); !errors.Is(err, ErrIncomplete) {
		t.Errorf("Wait after the only task deregistered: %v, want ErrIncomplete", err)
	}
	if err := Deregister(dir, "worker", 0, mine); err != nil {
		t.Errorf("deregistering twice: %v", err)
	}

	theirs := map[string]string{AddrGRPC: "127.0.0.1:2000"}
	if err := Register(dir, "worker", 0, mine); err != nil {
		t.Fatal(err)
	}
	if err := Register(dir, "worker", 0, theirs); err != nil {
		t.Fatal(err)
	}
	if err := Deregister(dir, "worker", 0, mine); err != nil {
		t.Fatal(err)
	}
	r, err := Wait(context.Background(), dir, map[string]int{"worker": 1})
	if err != nil {
		t.Fatalf("the replacement's registration went with the old task's: %v", err)
	}
	if got, _ := r.Cluster.Lookup("worker", 0); got != theirs[AddrGRPC] {
		t.Errorf("worker 0 at %s, want %s", got, theirs[AddrGRPC])
	}
}
