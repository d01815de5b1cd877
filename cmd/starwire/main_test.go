package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/rpc/cluster"
)

// binaryDir is where binary put the command, "" until it has: TestMain
// removes it, and must not make the command to find out where (a child
// process running one test, or a -run without such tests, would make it
// just to remove it).
var binaryDir string

// commandName is the name binary gives the command: a process whose
// executable has it is the command, not the tests (see TestMain).
const commandName = "starwire"

// binary makes the command once, for the tests that run it as separate
// processes: this test binary, linked (or copied) into a temporary
// directory as "starwire", which TestMain runs as the command's main. It
// is the command, built from the same sources, with no "go build" of its
// own (seconds of a test run, and a second build of everything beside
// the race pass). Processes the command starts from os.Executable (a
// cluster's tasks, bench's servers) are the command too.
var binary = sync.OnceValues(func() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "starwire-bin-")
	if err != nil {
		return "", err
	}
	binaryDir = dir
	path := filepath.Join(dir, commandName)
	if err := os.Link(self, path); err != nil {
		if err := copyFile(self, path); err != nil {
			return "", fmt.Errorf("copy the test binary as the command: %w", err)
		}
	}
	// Readable and runnable by all, for the tests that run it as an
	// unprivileged user.
	if err := os.Chmod(path, 0o755); err != nil {
		return "", err
	}
	return path, os.Chmod(dir, 0o755)
})

// copyFile copies the file at from to a new file at to.
func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

func TestMain(m *testing.M) {
	// Run as "starwire" (binary), this test binary is the command.
	if filepath.Base(os.Args[0]) == commandName {
		main()
	}
	// Every serve the tests start, in this process or another, holds the
	// same packet ticket, as a cluster's tasks do from its secret.
	dir, err := os.MkdirTemp("", "starwire-ticket")
	if err != nil {
		panic(err)
	}
	// Readable by all: the tests run some commands as another user, and
	// the ticket is the tests' own.
	ticket := filepath.Join(dir, "ticket")
	if err := os.Chmod(dir, 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile(ticket, []byte(testTicket.String()), 0o644); err != nil {
		panic(err)
	}
	os.Setenv(cluster.EnvPacketTicketFile, ticket)
	code := m.Run()
	// The commands that tests run in this process (serve, train, bench
	// and the rest) must leave no goroutine behind them, as a library's
	// would not.
	if code == 0 {
		if err := testwait.FindLeaks(testwait.LeakSettle); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left %v after the tests passed: %v\n", testwait.LeakSettle, err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

func buildBinary(t *testing.T) string {
	t.Helper()
	path, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// runMain runs the command in this process and returns its exit status and
// output.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

var heldOutRE = regexp.MustCompile(`held-out loss: initial ([0-9.]+), final ([0-9.]+)`)

// heldOutLoss parses the summary's held-out losses.
func heldOutLoss(t *testing.T, out string) (initial, final float64) {
	t.Helper()
	m := heldOutRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no held-out loss in the output:\n%s", out)
	}
	initial, _ = strconv.ParseFloat(m[1], 64)
	final, _ = strconv.ParseFloat(m[2], 64)
	return initial, final
}

// TestTrainBothProtocols trains the same seed over starwire and gRPC: the
// loss must drop on both and end up about the same.
func TestTrainBothProtocols(t *testing.T) {
	finals := map[string]float64{}
	for _, p := range []string{"grpc+seastar", "grpc"} {
		code, out, errOut := runMain(t, "train", "--protocol", p, "--steps", "150", "--vocab", "5000", "--seed", "3", "--held_out", "2048")
		if code != 0 {
			t.Fatalf("train over %s: exit %d: %s", p, code, errOut)
		}
		initial, final := heldOutLoss(t, out)
		t.Logf("%s: held-out loss %.4f -> %.4f", p, initial, final)
		if final > 0.85*initial {
			t.Errorf("over %s the held-out loss went from %.4f to %.4f, want a drop of at least 15%%", p, initial, final)
		}
		if want := "protocol: " + p; !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
		finals[p] = final
	}
	if d := math.Abs(finals["grpc+seastar"] - finals["grpc"]); d > 0.02 {
		t.Errorf("final losses %.4f (starwire) and %.4f (grpc) differ by %.4f, want within 0.02", finals["grpc+seastar"], finals["grpc"], d)
	}
}

// TestTrainOverUDP trains over afxdp's packet protocol on kernel UDP
// sockets, the transport a host without AF_XDP uses.
func TestTrainOverUDP(t *testing.T) {
	code, out, errOut := runMain(t, "train", "--transport", "udp", "--steps", "100", "--vocab", "5000", "--held_out", "1024")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	initial, final := heldOutLoss(t, out)
	if final >= initial {
		t.Errorf("held-out loss %.4f -> %.4f over UDP", initial, final)
	}
	if !strings.Contains(out, "afxdp packet protocol on kernel UDP") {
		t.Errorf("summary does not name the UDP transport:\n%s", out)
	}
}

// TestTrainAcrossProcesses starts a ps and two workers as separate serve
// processes on port 0, meeting in a registry directory, and trains against
// them: every step's rows reach the workers by RecvTensor from the ps
// process. The driver's summary says what carried the tasks' calls to each
// other, which only they know; the servers say what they do while they
// work; and stopping them empties the registry, so that a later launch in
// the directory does not find their dead addresses.
func TestTrainAcrossProcesses(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	for _, p := range []string{"grpc+seastar", "grpc"} {
		t.Run(p, func(t *testing.T) {
			dir := t.TempDir()
			var servers []*process
			for _, task := range []struct {
				job   string
				index int
			}{{"ps", 0}, {"worker", 0}, {"worker", 1}} {
				servers = append(servers, startBinary(t, nil, "serve", "--job", task.job, "--task", strconv.Itoa(task.index),
					"--ps", "1", "--workers", "2", "--registry_dir", dir, "--protocol", p, "--report", "100ms"))
			}
			code, out, errOut := runBinary(t, nil, "train", "--registry_dir", dir, "--protocol", p,
				"--steps", "100", "--vocab", "5000", "--held_out", "1024", "--connect_timeout", "20s")
			if code != 0 {
				t.Fatalf("train: exit %d: %s\n%s", code, errOut, out)
			}
			initial, final := heldOutLoss(t, out)
			if final >= initial {
				t.Errorf("held-out loss %.4f -> %.4f across processes", initial, final)
			}
			if !strings.Contains(out, "joining cluster") {
				t.Errorf("train did not join the registered cluster:\n%s", out)
			}
			path := "TCP"
			if p == "grpc" {
				path = "gRPC"
			}
			m := regexp.MustCompile(`(?m)^  tasks' calls to each other: ` + path + ` \(ps:0 \d+ calls, [0-9.]+ MB; worker:0 (\d+) calls, [0-9.]+ MB; worker:1 (\d+) calls`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("the summary does not say what carried the tasks' calls:\n%s", out)
			}
			if n, _ := strconv.Atoi(m[1]); n < 100 {
				t.Errorf("worker 0 made %d calls to its peers, want at least 100:\n%s", n, out)
			}
			// The worker said what it was doing while it worked.
			servers[1].waitLine(t, regexp.MustCompile(`^/job:worker/replica:0/task:0: \d+ calls to peers \([0-9.]+ MB\) over `+path+` in the last 100ms; \d+ in all$`), 10*time.Second)
			for _, s := range servers {
				if code := s.stop(t, syscall.SIGTERM); code != 0 {
					t.Errorf("serve exited %d on SIGTERM:\n%s", code, s.stderr.String())
				}
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				t.Errorf("registry entry left after the servers stopped: %s", e.Name())
			}
		})
	}
}

// TestStalenessRuns runs the benchmark and reads its table: a line saying
// what the columns mean, a row per protocol, and a closing comparison.
func TestStalenessRuns(t *testing.T) {
	code, out, errOut := runMain(t, "staleness", "--duration", "300ms", "--data_size", "0.5",
		"--push_frequency", "0.02", "--pull_frequency", "0.02", "--step_frequency", "0.002", "--workers", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "columns: staleness = versions a worker's copy is behind") || !strings.Contains(out, "lower is better") {
		t.Errorf("no line explains the columns:\n%s", out)
	}
	for _, p := range []string{"starwire", "grpc"} {
		re := regexp.MustCompile(`(?m)^pull +` + p + ` +2 +[0-9]+\.[0-9]{2} +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +([0-9]+\.[0-9]{2}|-)/`)
		if m := re.FindStringSubmatch(out); m == nil {
			t.Errorf("no row for %s:\n%s", p, out)
		}
	}
	if !regexp.MustCompile(`(?m)^comparison: starwire [0-9.]+× (less|more) stale than grpc|^comparison: starwire even`).MatchString(out) {
		t.Errorf("no comparison line:\n%s", out)
	}
}

// TestStalenessModes runs both modes over starwire and the filesystem
// baseline for two worker counts, writing the table, JSON and chart: a
// row per mode, protocol and count (the filesystem pulls only), and a
// line setting push against pull.
func TestStalenessModes(t *testing.T) {
	out := t.TempDir()
	code, stdout, errOut := runMain(t, "staleness", "--duration", "200ms", "--data_size", "0.25", "--mode", "pull,push",
		"--protocol", "starwire,filesystem", "--workers", "1,2", "--push_frequency", "0.02", "--pull_frequency", "0.02",
		"--step_frequency", "0.002", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, row := range []string{"pull starwire +1 ", "pull starwire +2 ", "push starwire +1 ", "push starwire +2 ", "pull filesystem +1 ", "pull filesystem +2 "} {
		if !regexp.MustCompile(`(?m)^` + row + ` *[0-9]+\.[0-9]{2} `).MatchString(stdout) {
			t.Errorf("no row %q:\n%s", row, stdout)
		}
	}
	if strings.Contains(stdout, "push filesystem") {
		t.Errorf("a push row for the filesystem:\n%s", stdout)
	}
	if !strings.Contains(stdout, "push against pull, staleness in versions behind: starwire 1 workers: p50 ") {
		t.Errorf("no line sets push against pull:\n%s", stdout)
	}
	for _, f := range []string{"staleness.txt", "staleness.json", "staleness.svg"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("--out wrote no %s: %v", f, err)
		}
	}
}

// freePort returns a loopback address nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestErrors runs the built binary with bad input and checks for one line
// on stderr saying what is wrong, and a non-zero exit.
func TestErrors(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	bin := buildBinary(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() }) // after the parallel subtests
	dead1, dead2, dead3 := freePort(t), freePort(t), freePort(t)
	emap := filepath.Join(t.TempDir(), "endpoints")
	if err := os.WriteFile(emap, []byte(dead1+"="+freePort(t)+"\n"+dead2+"="+freePort(t)+"\n"+dead3+"="+freePort(t)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadCluster := "ps=" + dead1 + ";worker=" + dead2 + "," + dead3
	noMap := "TF_SEASTAR_ENDPOINT_MAP_PATH=" + filepath.Join(t.TempDir(), "no-map")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
		env  []string
	}{
		{"no command", nil, 2, "usage", nil},
		{"unknown command", []string{"frob"}, 2, `unknown command "frob"`, nil},
		{"unknown flag", []string{"train", "--bogus"}, 2, "flag provided but not defined: -bogus", nil},
		{"bad steps", []string{"train", "--steps", "-3"}, 2, "train: --steps -3, want > 0", nil},
		{"progress zero", []string{"train", "--progress", "0"}, 2, "train: --progress 0s, want > 0", nil},
		{"bad protocol", []string{"train", "--protocol", "carrier-pigeon"}, 2, `protocol "carrier-pigeon"`, nil},
		{"bad cluster", []string{"train", "--cluster", "ps=nohostport"}, 2, "nohostport", nil},
		{"stray argument", []string{"train", "extra"}, 2, `unexpected argument "extra"`, nil},
		{"serve without job", []string{"serve", "--cluster", deadCluster}, 2, "--job is required", nil},
		{"serve unknown task", []string{"serve", "--job", "ps", "--task", "4", "--cluster", deadCluster, "--protocol", "grpc"}, 2, "task", nil},
		{"staleness workers", []string{"staleness", "--workers", "0"}, 2, "0 workers", nil},
		{"bad transport", []string{"train", "--transport", "smoke"}, 2, `--transport "smoke"`, nil},
		{"bad afxdp mode", []string{"train", "--afxdp", "maybe"}, 2, `--afxdp "maybe"`, nil},
		{"serve bad afxdp mode", []string{"serve", "--afxdp", "maybe"}, 2, `--afxdp "maybe": want "auto", "on" or "off"`, nil},
		{"manifests bad afxdp mode", []string{"cluster", "manifests", "--afxdp", "yes"}, 2, `--afxdp "yes": want "auto", "on" or "off"`, nil},
		{"serve afxdp on without iface", []string{"serve", "--job", "ps", "--afxdp", "on", "--cluster", deadCluster}, 2, "serve: --afxdp on needs --afxdp_iface", nil},
		{"missing endpoint map", []string{"train", "--cluster", deadCluster, "--endpoint_map", filepath.Join(t.TempDir(), "none")}, 2, "no such file", nil},
		{"unreachable peer grpc", []string{"train", "--cluster", deadCluster, "--protocol", "grpc", "--connect_timeout", "200ms"}, 1, "cluster unreachable", nil},
		{"unreachable peer star", []string{"train", "--cluster", deadCluster, "--endpoint_map", emap, "--connect_timeout", "200ms"}, 1, "cluster unreachable", nil},
		{"port in use", []string{"serve", "--job", "ps", "--task", "0", "--protocol", "grpc",
			"--cluster", "ps=" + busy.Addr().String() + ";worker=" + dead2}, 1, "address already in use", nil},
		// Knobs: one line naming the variable, its value and what it accepts.
		{"core number not a number", []string{"train"}, 2, `train: SEASTAR_CORE_NUMBER="abc": want a whole number from 1 to 1024`, []string{"SEASTAR_CORE_NUMBER=abc"}},
		{"core number zero", []string{"serve"}, 2, `serve: SEASTAR_CORE_NUMBER="0": want a whole number from 1 to 1024`, []string{"SEASTAR_CORE_NUMBER=0"}},
		{"core number huge", []string{"staleness"}, 2, `staleness: SEASTAR_CORE_NUMBER="100000": want a whole number from 1 to 1024`, []string{"SEASTAR_CORE_NUMBER=100000"}},
		{"core number negative", []string{"train"}, 2, `SEASTAR_CORE_NUMBER="-3": want`, []string{"SEASTAR_CORE_NUMBER=-3"}},
		{"ps core number", []string{"serve"}, 2, `NETWORK_PS_CORE_NUMBER="many": want`, []string{"NETWORK_PS_CORE_NUMBER=many"}},
		{"polling maybe", []string{"train"}, 2, `train: WORKER_ENABLE_POLLING="maybe": want true or false (also 1 or 0, any case)`, []string{"WORKER_ENABLE_POLLING=maybe"}},
		{"pin cores", []string{"serve"}, 2, `PS_DISABLE_PIN_CORES="yes": want true or false`, []string{"PS_DISABLE_PIN_CORES=yes"}},
		// TF_CONFIG that is not an object says so in JSON's words.
		{"tf_config a list", []string{"train"}, 2, `TF_CONFIG: want an object {"cluster": {...}, "task": {"type": ..., "index": ...}, "rpc_layer": ...}, got a list`, []string{"TF_CONFIG=[]"}},
		{"tf_config task a string", []string{"serve"}, 2, "TF_CONFIG: task: want an object, got a string", []string{`TF_CONFIG={"task": "ps"}`}},
		// The task is checked before the endpoint map is looked for.
		{"serve chief", []string{"serve", "--job", "chief", "--cluster", deadCluster}, 2, `serve: --job chief: serve runs ps and worker tasks; the chief is the driver, "starwire train"`, []string{noMap}},
		{"serve task not in cluster, no map", []string{"serve", "--job", "ps", "--task", "4", "--cluster", deadCluster}, 2, `serve: cluster: /job:ps/replica:0/task:4: no such task`, []string{noMap}},
		{"serve job not in cluster, no map", []string{"serve", "--job", "worker_x", "--cluster", deadCluster}, 2, `job "worker_x" not in cluster`, []string{noMap}},
		// Wording.
		{"transport with command", []string{"train", "--transport", "quic"}, 2, `train: --transport "quic", want "tcp" or "udp"`, nil},
		{"serve transport", []string{"serve", "--job", "ps", "--transport", "quic", "--cluster", deadCluster}, 2, `serve: --transport "quic"`, nil},
		{"data size in MB", []string{"staleness", "--data_size", "-1"}, 2, "staleness: --data_size -1 MB, want > 0", nil},
		{"vocab per ps", []string{"train", "--vocab", "0"}, 2, "train: --vocab 0, want at least 8: no fewer ids than an example's fields (8), the parameter servers (1) or two", nil},
		{"vocab of one id", []string{"train", "--vocab", "1"}, 2, "train: --vocab 1, want at least 8", nil},
		{"learning rate", []string{"train", "--learning_rate", "0"}, 2, "train: --learning_rate 0, want > 0", nil},
		{"registry never filled", []string{"train", "--registry_dir", t.TempDir(), "--cluster_wait", "100ms"}, 1, "starwire: train: cluster: wait for cluster in ", nil},
		{"registry dir missing", []string{"train", "--registry_dir", os.TempDir() + "/starwire-no-such-registry", "--cluster_wait", "1m"}, 2, "starwire: train: --registry_dir " + os.TempDir() + "/starwire-no-such-registry: no such directory", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each runs a process of its own and waits on it
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Env = append(append(os.Environ(), "TF_CONFIG="), tc.env...)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = io.Discard, &stderr
			err := cmd.Run()
			code := cmd.ProcessState.ExitCode()
			if err != nil && code == -1 {
				t.Fatalf("run: %v", err)
			}
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			lines := nonEmptyLines(stderr.String())
			if tc.args == nil {
				return // the usage text
			}
			if len(lines) != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", len(lines), stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.want)
			}
			// Errors speak of flags, variables and tasks, not of Go.
			for _, internal := range []string{"lr:", "tasks:", "Go value", "Go struct", "panic"} {
				if strings.Contains(stderr.String(), internal) {
					t.Errorf("stderr %q says %q", stderr.String(), internal)
				}
			}
		})
	}
}

func nonEmptyLines(s string) []string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

// TestTFConfig launches a cluster the way TensorFlow launchers do: every
// process gets TF_CONFIG with the cluster and its own task, and the
// grpc+seastar endpoint map comes from TF_SEASTAR_ENDPOINT_MAP_PATH.
func TestTFConfig(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	bin := buildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	grpcAddrs := []string{freePort(t), freePort(t), freePort(t)}
	var emap strings.Builder
	for _, a := range grpcAddrs {
		fmt.Fprintf(&emap, "%s=%s\n", a, freePort(t))
	}
	emapPath := filepath.Join(t.TempDir(), "endpoint_map")
	if err := os.WriteFile(emapPath, []byte(emap.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cluster := fmt.Sprintf(`{"ps": [%q], "worker": [%q, %q]}`, grpcAddrs[0], grpcAddrs[1], grpcAddrs[2])
	env := func(job string, index int) []string {
		return append(os.Environ(),
			"TF_SEASTAR_ENDPOINT_MAP_PATH="+emapPath,
			fmt.Sprintf(`TF_CONFIG={"cluster": %s, "task": {"type": %q, "index": %d}, "rpc_layer": "grpc+seastar"}`, cluster, job, index))
	}
	for _, task := range []struct {
		job   string
		index int
	}{{"ps", 0}, {"worker", 0}, {"worker", 1}} {
		cmd := exec.CommandContext(ctx, bin, "serve")
		cmd.Env = env(task.job, task.index)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
			if t.Failed() {
				t.Logf("%s %d:\n%s", task.job, task.index, out.String())
			}
		})
	}
	cmd := exec.CommandContext(ctx, bin, "train", "--steps", "100", "--vocab", "5000", "--held_out", "1024", "--connect_timeout", "20s")
	cmd.Env = env("worker", 0)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	initial, final := heldOutLoss(t, string(out))
	if final >= initial {
		t.Errorf("held-out loss %.4f -> %.4f", initial, final)
	}
	if !strings.Contains(string(out), "protocol: grpc+seastar") {
		t.Errorf("TF_CONFIG's rpc_layer was not used:\n%s", out)
	}

	// The coordinator, as TensorFlow and Kubeflow launch it: task type
	// "chief", listed in the cluster (with an address nothing serves:
	// the chief is the driver) or not.
	chief := freePort(t)
	for _, c := range []string{
		fmt.Sprintf(`{"chief": [%q], "ps": [%q], "worker": [%q, %q]}`, chief, grpcAddrs[0], grpcAddrs[1], grpcAddrs[2]),
		cluster,
	} {
		cmd := exec.CommandContext(ctx, bin, "train", "--steps", "20", "--vocab", "5000", "--held_out", "512", "--connect_timeout", "20s")
		cmd.Env = append(os.Environ(), "TF_SEASTAR_ENDPOINT_MAP_PATH="+emapPath,
			fmt.Sprintf(`TF_CONFIG={"cluster": %s, "task": {"type": "chief", "index": 0}, "rpc_layer": "grpc+seastar"}`, c))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("train as the chief of %s: %v\n%s", c, err, out)
		}
		if !strings.Contains(string(out), "joining cluster: ps="+grpcAddrs[0]+";worker=") {
			t.Errorf("the chief did not join the ps and workers:\n%s", out)
		}
	}
}

// TestTrainRegistryWaitSaysWhat: a train waiting for --registry_dir's
// tasks says, every few seconds, which entries are still missing.
func TestTrainRegistryWaitSaysWhat(t *testing.T) {
	t.Parallel() // waits, computes nothing
	dir := t.TempDir()
	code, _, errOut := runBinary(t, nil, "train", "--registry_dir", dir, "--ps", "1", "--workers", "2", "--cluster_wait", "6s")
	lines := nonEmptyLines(errOut)
	// The elapsed time between is the machine's: 5s, or 6s when loaded.
	head, tail := "starwire: train: waiting for 3 of 3 tasks to register in "+dir+" (", "s of --cluster_wait 6s): ps:0, worker:0, worker:1"
	if code != 1 || len(lines) != 2 || !strings.HasPrefix(lines[0], head) || !strings.HasSuffix(lines[0], tail) || !strings.Contains(lines[1], "wait for cluster in") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1, %q...%q, then the timeout", code, errOut, head, tail)
	}
}
