package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/starwire/starwire/internal/capture"
)

// TestServePcap runs a cluster over the packet protocol on kernel UDP with
// --pcap on one worker, trains on it, and dissects the capture: every
// frame Ethernet/IPv4/UDP with good checksums and a starwire header.
func TestServePcap(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "worker0.pcap")
	var servers []*process
	for _, task := range []struct {
		job   string
		index int
	}{{"ps", 0}, {"worker", 0}, {"worker", 1}} {
		args := []string{"serve", "--job", task.job, "--task", strconv.Itoa(task.index),
			"--ps", "1", "--workers", "2", "--registry_dir", dir, "--report", "0", "--transport", "udp"}
		if task.job == "worker" && task.index == 0 {
			args = append(args, "--pcap", path)
		}
		servers = append(servers, startBinary(t, nil, args...))
	}
	code, out, errOut := runBinary(t, nil, "train", "--registry_dir", dir, "--transport", "udp", "--steps", "10",
		"--vocab", "5000", "--held_out", "256", "--connect_timeout", "20s")
	if code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errOut, out)
	}
	for _, s := range servers {
		if code := s.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("serve exited %d on SIGTERM:\n%s", code, s.stderr.String())
		}
	}
	m := regexp.MustCompile(`(?m)^pcap: (\d+) frames in ` + regexp.QuoteMeta(path) + `$`).FindStringSubmatch(servers[1].out.String())
	if m == nil {
		t.Fatalf("serve did not say what it captured:\n%s", servers[1].out.String())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := capture.Check(f)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := strconv.Atoi(m[1]); n != want || n < 20 {
		t.Fatalf("%d frames dissected, serve wrote %s; want the worker's traffic of 10 steps", n, m[1])
	}
	code, _, stderr := runBinary(t, nil, "serve", "--job", "ps", "--ps", "1", "--workers", "1", "--registry_dir", dir, "--pcap", path)
	if code != 2 || !regexp.MustCompile(`--pcap captures the packet path`).MatchString(stderr) {
		t.Errorf("serve --pcap over TCP: exit %d, %s", code, stderr)
	}
}
