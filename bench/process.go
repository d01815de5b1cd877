package bench

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ServingPrefix starts the line a server process prints once it serves:
// the prefix, then FormatAddrs of its servers.
const ServingPrefix = "bench servers: "

// ProcessSpawner returns a Spawner that runs the servers in a process of
// their own: command(req) makes the command, which must print a
// ServingPrefix line and serve until its standard input closes. It starts
// in req's namespace, when it has one.
func ProcessSpawner(command func(req SpawnRequest) *exec.Cmd) Spawner {
	return func(ctx context.Context, req SpawnRequest) (map[string]string, func(), error) {
		cmd := command(req)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, nil, err
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := cmd.Start
		if req.InNamespace != nil {
			start = func() error { return req.InNamespace(cmd.Start) }
		}
		if err := start(); err != nil {
			return nil, nil, fmt.Errorf("bench: start server process: %w", err)
		}
		stop := func() {
			stdin.Close()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
		lines := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if line, ok := strings.CutPrefix(sc.Text(), ServingPrefix); ok {
					lines <- line
				}
			}
			close(lines)
		}()
		select {
		case line, ok := <-lines:
			if !ok {
				stop()
				return nil, nil, fmt.Errorf("bench: server process ended before serving: %s", strings.TrimSpace(stderr.String()))
			}
			addrs, err := ParseTargetAddrs(line)
			if err != nil {
				stop()
				return nil, nil, err
			}
			addrs[PIDKey] = strconv.Itoa(cmd.Process.Pid)
			return addrs, stop, nil
		case <-time.After(20 * time.Second):
			stop()
			return nil, nil, fmt.Errorf("bench: server process did not serve within 20s: %s", strings.TrimSpace(stderr.String()))
		case <-ctx.Done():
			stop()
			return nil, nil, ctx.Err()
		}
	}
}
