package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starwire/starwire/rpc/cluster"
)

// TestServePacketTicket: serve refuses a packet path that would take
// sessions from anyone unless told so, and a ticket file it cannot use.
func TestServePacketTicket(t *testing.T) {
	t.Setenv(cluster.EnvPacketTicketFile, "")
	args := []string{"serve", "--job", "ps", "--cluster", "ps=127.0.0.1:1;worker=127.0.0.1:2", "--transport", "udp"}
	code, _, errOut := runMain(t, args...)
	if code != 2 || !strings.Contains(errOut, "--packet_ticket_file") || !strings.Contains(errOut, "--insecure_packet_path") {
		t.Errorf("--transport udp without a ticket: exit %d: %s", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "ticket")
	if err := os.WriteFile(bad, []byte("not hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runMain(t, append(args, "--packet_ticket_file", bad)...)
	if code != 2 || !strings.Contains(errOut, "packet ticket "+bad) {
		t.Errorf("a ticket file that holds no ticket: exit %d: %s", code, errOut)
	}
	code, _, errOut = runMain(t, append(args, "--packet_ticket_file", bad, "--insecure_packet_path")...)
	if code != 2 || !strings.Contains(errOut, "give one") {
		t.Errorf("a ticket and --insecure_packet_path: exit %d: %s", code, errOut)
	}
}

// TestTrainJoinPacketTicket: train refuses to join a cluster over the
// packet path without the ticket its tasks hold, before dialing anything.
func TestTrainJoinPacketTicket(t *testing.T) {
	t.Setenv(cluster.EnvPacketTicketFile, "")
	emap := filepath.Join(t.TempDir(), "map")
	if err := os.WriteFile(emap, []byte("127.0.0.1:1=127.0.0.1:3\n127.0.0.1:2=127.0.0.1:4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runMain(t, "train", "--cluster", "ps=127.0.0.1:1;worker=127.0.0.1:2", "--endpoint_map", emap, "--transport", "udp", "--connect_timeout", "100ms")
	if code != 2 || !strings.Contains(errOut, "--packet_ticket_file") || !strings.Contains(errOut, "--insecure_packet_path") {
		t.Errorf("train --transport udp on a cluster, without a ticket: exit %d: %s", code, errOut)
	}
}

// TestServeUnknownIface: an --afxdp_iface that does not exist is a usage
// error at once, not a task serving over TCP as if none had been named.
func TestServeUnknownIface(t *testing.T) {
	code, _, errOut := runBinary(t, []string{cluster.EnvPacketTicketFile + "="}, "serve", "--job", "ps", "--cluster", "ps=127.0.0.1:1;worker=127.0.0.1:2",
		"--afxdp_iface", "noeth9", "--insecure_packet_path")
	if code != 2 || !strings.Contains(errOut, `--afxdp_iface "noeth9": no such interface`) {
		t.Errorf("serve --afxdp_iface noeth9: exit %d: %s", code, errOut)
	}
}
