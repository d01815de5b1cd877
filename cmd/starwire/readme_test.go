package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/rpc/cluster"
)

// readme returns the repository's README.
func readme(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// indentedBlock returns the first indented code block after marker in
// text, unindented.
func indentedBlock(t *testing.T, text, marker string) string {
	t.Helper()
	i := strings.Index(text, marker)
	if i < 0 {
		t.Fatalf("README has no %q", marker)
	}
	var block []string
	for _, l := range strings.Split(text[i:], "\n")[1:] {
		if strings.HasPrefix(l, "    ") {
			block = append(block, l[4:])
		} else if len(block) > 0 {
			break
		}
	}
	return strings.Join(block, "\n") + "\n"
}

// TestREADMEProtocPlugins: the README installs the protoc-gen-go that
// go.mod pins, and builds nothing into the working tree.
func TestREADMEProtocPlugins(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*google\.golang\.org/protobuf (v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod requires no google.golang.org/protobuf")
	}
	text := readme(t)
	want := "go install google.golang.org/protobuf/cmd/protoc-gen-go@" + string(m[1])
	if !strings.Contains(text, want) {
		t.Errorf("README lacks %q, the version go.mod pins", want)
	}
	if strings.Contains(text, "-o bin/") {
		t.Error("README builds into bin/, which git does not ignore")
	}
}

// TestREADMECertificates runs the README's certificate recipe as written,
// then a ps and a worker serving with their directories and train with
// the chief's, over mutual TLS.
func TestREADMECertificates(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	if _, err := exec.LookPath("openssl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("openssl is needed to check the README's certificate recipe (.ci/run installs it)")
		}
		t.Skip("no openssl")
	}
	dir := t.TempDir()
	recipe := indentedBlock(t, readme(t), "**Certificates.**")
	cmd := exec.Command("sh", "-e", "-c", recipe)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's recipe: %v\n%s\n%s", err, recipe, out)
	}
	reg := t.TempDir()
	var servers []*process
	for _, job := range []string{"ps", "worker"} {
		p := startBinary(t, nil, "serve", "--job", job, "--task", "0", "--ps", "1", "--workers", "1",
			"--registry_dir", reg, "--report", "0", "--tls_dir", filepath.Join(dir, "tls", job+"-0"))
		servers = append(servers, p)
	}
	for _, p := range servers {
		if line := p.waitLine(t, regexp.MustCompile(`serving: `), 30*time.Second); !strings.Contains(line, "mutual TLS 1.3") {
			t.Errorf("serve does not say it uses TLS: %s", line)
		}
	}
	code, out, errOut := runBinary(t, nil, "train", "--registry_dir", reg, "--ps", "1", "--workers", "1", "--steps", "20",
		"--vocab", "5000", "--held_out", "256", "--connect_timeout", "20s", "--tls_dir", filepath.Join(dir, "tls", "chief"))
	if code != 0 || !strings.Contains(out, "mutual TLS") {
		t.Errorf("train with the chief's certificate: exit %d: %s\n%s", code, errOut, out)
	}
}

// fencedGo returns the first ```go block after marker in text.
func fencedGo(t *testing.T, text, marker string) string {
	t.Helper()
	i := strings.Index(text, marker)
	if i < 0 {
		t.Fatalf("README has no %q", marker)
	}
	a := strings.Index(text[i:], "```go\n")
	if a < 0 {
		t.Fatalf("README has no Go block after %q", marker)
	}
	body := text[i+a+len("```go\n"):]
	return body[:strings.Index(body, "```")]
}

// runRecipe runs script with sh in dir, the starwire command in it being
// the built binary, and returns its output. sh and the jobs it starts in
// the background are a process group of their own, killed when sh ends
// (or after 90s), so that no task outlives the test.
func runRecipe(t *testing.T, dir, script string, env ...string) string {
	t.Helper()
	bin := buildBinary(t)
	script = regexp.MustCompile(`(?m)^starwire `).ReplaceAllString(script, bin+" ")
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command("sh", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "TF_CONFIG="), env...)
	cmd.Stdout, cmd.Stderr = out, out // a file: Wait waits for sh alone
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	group := -cmd.Process.Pid
	timer := time.AfterFunc(90*time.Second, func() { syscall.Kill(group, syscall.SIGKILL) })
	err = cmd.Wait()
	timer.Stop()
	syscall.Kill(group, syscall.SIGKILL)
	b, rerr := os.ReadFile(out.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("the README's commands: %v\n%s\n%s", err, script, b)
	}
	return string(b)
}

// TestREADMEMetrics runs the README's /metrics example, its tasks also on
// the packet path (over kernel UDP, under the tests' ticket) so that its
// counters are served too, and checks that every starwire metric served
// is in the README's table.
func TestREADMEMetrics(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	text := readme(t)
	recipe := indentedBlock(t, text, "A task serves `/metrics` once its cluster is complete")
	addr, err := cluster.FreePort("tcp", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	reg := t.TempDir()
	recipe = strings.ReplaceAll(strings.ReplaceAll(recipe, "127.0.0.1:9464", addr), "/tmp/metrics-reg", reg)
	recipe = regexp.MustCompile(`(?m)^(starwire serve .*?) &$`).ReplaceAllString(recipe, "$1 --transport udp --report 0 &")
	out := runRecipe(t, t.TempDir(), recipe)
	served := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(starwire_[a-z_]+?)(_bucket|_sum|_count)?[{ ]`).FindAllStringSubmatch(out, -1) {
		served[m[1]] = true
	}
	if !served["starwire_afxdp_packets_sent_total"] {
		t.Fatalf("the packet path's counters were not served:\n%s", out)
	}
	for name := range served {
		if !strings.Contains(text, "| `"+name+"` |") {
			t.Errorf("/metrics serves %s, which the README's table lacks", name)
		}
	}
}

// TestREADMEKnownPorts runs the README's cluster on known ports, every task
// and train, on ports free here instead of the README's.
func TestREADMEKnownPorts(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	recipe := indentedBlock(t, readme(t), "Every task is started, then train")
	for _, port := range []string{"2222", "2223", "2224", "2225"} {
		free, err := cluster.FreePort("tcp", "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(recipe, ":"+port) {
			t.Fatalf("the README's cluster does not use port %s:\n%s", port, recipe)
		}
		recipe = strings.ReplaceAll(recipe, "127.0.0.1:"+port, free)
	}
	// A short run: the README's is the default job.
	recipe = regexp.MustCompile(`(?m)^(starwire train .*)$`).ReplaceAllString(recipe, "$1 --steps 20 --vocab 5000 --held_out 256 --connect_timeout 30s")
	if out := runRecipe(t, t.TempDir(), recipe); !strings.Contains(out, "examples/s") {
		t.Errorf("train on the README's cluster printed no summary:\n%s", out)
	}
}

// TestREADMEGoAPI builds and runs the README's Go program in a module of
// its own, made by the README's go.mod recipe pointed at this clone.
func TestREADMEGoAPI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	text := readme(t)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(fencedGo(t, text, "Use the Go API")), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	recipe := strings.ReplaceAll(indentedBlock(t, text, "Its `go.mod` takes starwire from a clone"), "/path/to/starwire", root)
	if !strings.Contains(recipe, root) {
		t.Fatalf("the recipe does not name the clone's path:\n%s", recipe)
	}
	if out := runRecipe(t, dir, recipe); !strings.HasSuffix(out, "hi\n") {
		t.Errorf("the README's program printed %q, want its echo \"hi\"", out)
	}
}

// TestDockerignoreCoversBuilds: the binaries the README builds in the work
// tree, and what git ignores, stay out of the image's build context, where
// a stale binary would ride along into every image build.
func TestDockerignoreCoversBuilds(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			ignored[strings.TrimPrefix(l, "/")] = true
		}
	}
	builds := regexp.MustCompile(`go build -o (\S+)`).FindAllStringSubmatch(readme(t), -1)
	if len(builds) == 0 {
		t.Fatal("the README builds no binary")
	}
	for _, b := range builds {
		if out := strings.TrimPrefix(b[1], "./"); !strings.HasPrefix(out, "/") && !ignored[out] {
			t.Errorf(".dockerignore does not exclude %s, which the README builds in the work tree", out)
		}
	}
	gi, err := os.ReadFile(filepath.Join("..", "..", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(gi), "\n") {
		if l = strings.TrimSpace(l); l != "" && !ignored[strings.TrimPrefix(l, "/")] {
			t.Errorf(".dockerignore does not exclude %s, which git ignores", l)
		}
	}
}

// summaryPath matches the summary's path line: each path's share of calls
// (their count) and of bytes.
var summaryPath = regexp.MustCompile(`^path: ((?:[^;%]+ \d+\.\d% of calls \(\d+\), \d+\.\d% of bytes(?:; |$))+)`)

// summaryWhy matches the summary's why line, in each of its forms.
var summaryWhy = regexp.MustCompile(`^why: the driver's calls over \S+ \(--transport\); the tasks' calls to each other: ` +
	`(AF_XDP unavailable: .+|AF_XDP off \(--afxdp off\)|--afxdp_path .+|auto: (AF_XDP|TCP) measured faster for .+ on this machine .+)$`)

// TestREADMEFirstScreen runs the README's first command, the main job, and
// checks that its summary says what carried the calls and why, in the
// lines the README shows and explains: shares that add up to the RPCs the
// summary counts, and the reason for this machine (as root, AF_XDP's
// measured choice).
func TestREADMEFirstScreen(t *testing.T) {
	t.Parallel() // runs a process, which waits more than it computes
	text := readme(t)
	block := strings.Split(strings.TrimSpace(indentedBlock(t, text, "Run the main job")), "\n")
	if len(block) != 1 || block[0] != "go run ./cmd/starwire train" {
		t.Fatalf("the README's first command is %q", block)
	}
	shown := strings.Split(strings.TrimSpace(indentedBlock(t, text, "Its summary\nends with what carried the job's calls and why")), "\n")
	if len(shown) != 2 || !summaryPath.MatchString(shown[0]) || !summaryWhy.MatchString(shown[1]) {
		t.Fatalf("the README's summary lines are not train's:\n%s", strings.Join(shown, "\n"))
	}
	code, out, errOut := runBinary(t, nil, "train")
	if code != 0 {
		t.Fatalf("train: exit %d\n%s\n%s", code, out, errOut)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimPrefix(l, "  ")
		for _, p := range []string{"path: ", "why: ", "RPCs "} {
			if strings.HasPrefix(l, p) {
				lines[p] = l
			}
		}
	}
	m := summaryPath.FindStringSubmatch(lines["path: "])
	if m == nil || !summaryWhy.MatchString(lines["why: "]) {
		t.Fatalf("train's summary has no path and why lines as the README shows:\n%s", out)
	}
	var calls, share int64
	for _, c := range regexp.MustCompile(`(\d+)\.(\d)% of calls \((\d+)\)`).FindAllStringSubmatch(m[1], -1) {
		n, _ := strconv.ParseInt(c[3], 10, 64)
		p, _ := strconv.ParseInt(c[1]+c[2], 10, 64)
		calls, share = calls+n, share+p
	}
	if rpcs := regexp.MustCompile(`RPCs \(.*\): (\d+) `).FindStringSubmatch(lines["RPCs "]); rpcs == nil || rpcs[1] != strconv.FormatInt(calls, 10) {
		t.Errorf("the path line counts %d calls, the summary %q", calls, lines["RPCs "])
	}
	if share < 998 || share > 1002 {
		t.Errorf("the path line's shares add up to %.1f%%: %s", float64(share)/10, lines["path: "])
	}
	want := "auto: "
	switch {
	case os.Geteuid() != 0:
		want = "AF_XDP unavailable: AF_XDP needs root"
	case netns.Probe() != nil && os.Getenv(netnstest.RequireEnv) != "1":
		want = "AF_XDP unavailable: AF_XDP setup failed"
	}
	if !strings.Contains(lines["why: "], "the tasks' calls to each other: "+want) {
		t.Errorf("why line %q, want the reason %q here", lines["why: "], want)
	}
}
