package bench

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkEcho64Remote is BenchmarkEcho64 with the servers in a process of
// their own (cmd/echoserver, built for the run), the layout users deploy.
func BenchmarkEcho64Remote(b *testing.B) {
	benchEcho(b, startRemote(b))
}

// startRemote builds cmd/echoserver into a temporary directory, starts it on
// free loopback ports and returns its addresses. The server exits when its
// standard input closes, which cleanup does first; it is killed if it has
// not exited a few seconds later.
func startRemote(b *testing.B) Addrs {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "echoserver")
	build := exec.Command("go", "build", "-o", bin, "./cmd/echoserver")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build echoserver: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-starwire", "127.0.0.1:0", "-grpc", "127.0.0.1:0", "-raw", "127.0.0.1:0",
		"-stdin", "-lifetime", "10m")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("start echoserver: %v", err)
	}
	serverPID.Store(int64(cmd.Process.Pid))
	exited := make(chan error, 1)
	b.Cleanup(func() {
		serverPID.Store(0)
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		// Drain until exit, then reap.
		for sc.Scan() {
		}
		exited <- cmd.Wait()
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			b.Fatal("echoserver exited before printing its addresses")
		}
		a, err := ParseAddrs(line)
		if err != nil {
			b.Fatal(err)
		}
		return a
	case <-time.After(30 * time.Second):
		b.Fatal("echoserver printed no addresses within 30s")
	}
	return Addrs{}
}
