package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServeOneOwnerPerTask starts two serve processes for the same task
// at once against one registry directory, in a few rounds: exactly one
// registers and serves, and the other refuses at start, in one line
// naming the holder's host, pid and since when; the registration is the
// holder's.
func TestServeOneOwnerPerTask(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	registered := regexp.MustCompile(`^/job:ps/replica:0/task:0 registered grpc `)
	for round := range 3 {
		reg := t.TempDir()
		args := []string{"serve", "--job", "ps", "--task", "0", "--ps", "1", "--workers", "1", "--registry_dir", reg, "--report", "0"}
		both := [2]*process{startBinary(t, nil, args...), startBinary(t, nil, args...)}
		// An event is a line of a process's stdout or, line "", its end.
		type event struct {
			i    int
			line string
		}
		events := make(chan event, 16)
		for i, p := range both {
			go func() {
				for line := range p.lines {
					events <- event{i, line}
				}
				p.cmd.Wait() // its stdout is read to the end: it exited
				events <- event{i, ""}
			}()
		}
		holder, refused := -1, -1
		deadline := time.After(30 * time.Second)
		for holder < 0 || refused < 0 {
			select {
			case e := <-events:
				switch {
				case e.line == "" && refused >= 0:
					t.Fatalf("round %d: both serve processes exited:\n%s\n%s", round, both[0].stderr.String(), both[1].stderr.String())
				case e.line == "":
					refused = e.i
				case registered.MatchString(e.line) && holder >= 0:
					t.Fatalf("round %d: both serve processes registered the task: %q", round, e.line)
				case registered.MatchString(e.line):
					holder = e.i
				}
			case <-deadline:
				t.Fatalf("round %d: after 30s, registered %d, exited %d (-1: none)", round, holder, refused)
			}
		}
		if holder == refused {
			t.Fatalf("round %d: the one serve process that registered exited: %s", round, both[holder].stderr.String())
		}
		pid := strconv.Itoa(both[holder].cmd.Process.Pid)
		lost := both[refused]
		errLine := lost.stderr.String()
		want := "starwire: serve: cluster: register /job:ps/replica:0/task:0 in " + reg + ": registration held by a live task: host " + host + ", pid " + pid + ", since "
		if code := lost.cmd.ProcessState.ExitCode(); code != 1 || !strings.HasPrefix(errLine, want) || strings.Count(errLine, "\n") != 1 {
			t.Fatalf("round %d: the second serve exited %d, stderr %q; want exit 1 and one line starting %q", round, code, errLine, want)
		}
		b, err := os.ReadFile(filepath.Join(reg, "ps.0.json"))
		if err != nil || !strings.Contains(string(b), `"pid":`+pid+",") {
			t.Fatalf("round %d: the registration is %s, %v; want the holder's, pid %s", round, b, err, pid)
		}
		t.Logf("round %d: %s", round, strings.TrimSpace(errLine))
		both[holder].cmd.Process.Kill()
		for e := range events {
			if e.i == holder && e.line == "" {
				break
			}
		}
	}
}
