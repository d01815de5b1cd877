package main

import (
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/rpc/cluster"
)

// TestTrainTCPAgainstUDPCluster trains over TCP against tasks serving
// starwire over UDP: the error says so, and which flag fixes it.
func TestTrainTCPAgainstUDPCluster(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	reg := t.TempDir()
	var servers []*process
	for _, job := range []string{"ps", "worker"} {
		p := startBinary(t, nil, "serve", "--job", job, "--task", "0", "--ps", "1", "--workers", "1",
			"--registry_dir", reg, "--transport", "udp", "--report", "0")
		defer p.stop(t, syscall.SIGTERM)
		servers = append(servers, p)
	}
	for _, p := range servers {
		p.waitLine(t, regexp.MustCompile(`serving: `), 30*time.Second)
	}
	code, _, errOut := runBinary(t, nil, "train", "--registry_dir", reg, "--ps", "1", "--workers", "1", "--steps", "10", "--connect_timeout", "20s")
	if code != 1 || !strings.Contains(errOut, "needs train --transport udp") {
		t.Errorf("train over TCP against a UDP cluster: exit %d: %s", code, errOut)
	}
}

// TestHelpOneDefault: no flag of a command's help shows two defaults, or
// its value's type as the bare word "value".
func TestHelpOneDefault(t *testing.T) {
	for _, cmd := range []string{"train", "serve", "staleness", "bench", "health"} {
		code, out, errOut := runMain(t, cmd, "-h")
		if code != 0 {
			t.Fatalf("%s -h: exit %d: %s", cmd, code, errOut)
		}
		lines := strings.Split(out, "\n")
		for i, l := range lines {
			if strings.Count(l, "(default") > 1 {
				t.Errorf("%s -h: two defaults: %s", cmd, l)
			}
			if strings.HasSuffix(l, " value") && strings.HasPrefix(strings.TrimSpace(l), "-") {
				t.Errorf("%s -h: a flag of type \"value\": %s %s", cmd, l, strings.TrimSpace(lines[min(i+1, len(lines)-1)]))
			}
		}
	}
}

// TestTrainInsecureAgainstTicketedCluster trains over the packet path with
// --insecure_packet_path against tasks that take sessions only under their
// ticket: the error says which flag fixes it, not only that a deadline
// passed.
func TestTrainInsecureAgainstTicketedCluster(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	reg := t.TempDir()
	var servers []*process
	for _, job := range []string{"ps", "worker"} {
		p := startBinary(t, nil, "serve", "--job", job, "--task", "0", "--ps", "1", "--workers", "1",
			"--registry_dir", reg, "--transport", "udp", "--report", "0")
		defer p.stop(t, syscall.SIGTERM)
		servers = append(servers, p)
	}
	for _, p := range servers {
		p.waitLine(t, regexp.MustCompile(`serving: `), 30*time.Second)
	}
	code, _, errOut := runBinary(t, []string{cluster.EnvPacketTicketFile + "="}, "train", "--registry_dir", reg, "--ps", "1", "--workers", "1",
		"--steps", "10", "--transport", "udp", "--insecure_packet_path", "--connect_timeout", "3s")
	if code != 1 || !strings.Contains(errOut, "needs train --packet_ticket_file with the same ticket") {
		t.Errorf("train --insecure_packet_path against a ticketed cluster: exit %d: %s", code, errOut)
	}
}
