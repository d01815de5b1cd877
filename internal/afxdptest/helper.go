package afxdptest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/netns"
)

// A test binary doubles as a peer process that a test can kill or run in
// another namespace: StartHelper re-executes it with the variables below
// set, and its TestMain, calling ServeHelper, serves the role instead of
// running tests.
const (
	helperEnv     = "AFXDP_TEST_HELPER"
	helperLinkEnv = "AFXDP_TEST_LINK"
	helperKindEnv = "AFXDP_TEST_KIND"
	helperAddrEnv = "AFXDP_TEST_ADDR"
	helperLife    = 10 * time.Minute // a bound in case the parent's pipe stays open
	helperStart   = 10 * time.Second
)

// Helper is what StartHelper tells the process it starts.
type Helper struct {
	Link string // the veth end to serve on
	Kind string // a variant of the role, for the role to interpret
	Addr string // the address of the veth end
}

// ServeHelper returns at once unless StartHelper started this process in
// role. Then it calls start, tells the parent the helper is ready, and when
// the parent is done calls the stop start returned and exits the process.
func ServeHelper(role string, start func(Helper) (stop func(), err error)) {
	if role == "" || os.Getenv(helperEnv) != role {
		return
	}
	stop, err := start(Helper{Link: os.Getenv(helperLinkEnv), Kind: os.Getenv(helperKindEnv), Addr: os.Getenv(helperAddrEnv)})
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", role, err)
		os.Exit(1)
	}
	os.Stdout.WriteString("ready\n")
	waitForParent()
	stop()
	os.Exit(0)
}

// StartHelper runs this test binary as a helper of role in e's namespace,
// waits for it to say it serves, and stops it at the end of the test. It
// returns the helper's command, for a test that kills it.
func StartHelper(tb testing.TB, e *netns.End, role, kind string) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command("ip", "netns", "exec", e.NS, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+role, helperLinkEnv+"="+e.Link,
		helperKindEnv+"="+kind, helperAddrEnv+"="+e.Addr.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stopHelper(cmd, stdin) })
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- strings.TrimSpace(line)
	}()
	select {
	case line := <-ready:
		if line != "ready" {
			tb.Fatalf("helper %s said %q", role, line)
		}
	case <-time.After(helperStart):
		tb.Fatalf("helper %s did not start within %v", role, helperStart)
	}
	return cmd
}

// stopHelper closes the helper's standard input, which asks for a clean
// exit that detaches its XDP program, and kills it if it does not exit.
func stopHelper(cmd *exec.Cmd, stdin io.Closer) {
	stdin.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// waitForParent returns when standard input closes (the parent is done or
// died) or the helper's life bound passes.
func waitForParent() {
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-time.After(helperLife):
	}
}
