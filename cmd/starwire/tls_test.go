package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/tlstest"
	"github.com/starwire/starwire/rpc/cluster"
)

// TestTrainOverMutualTLS trains on a local cluster whose gRPC and starwire
// ports all require mutual TLS, with the certificates given as a mounted
// secret's directory, by flag and by variable, under grpc+seastar and
// under grpc, whose tasks' peer calls are gRPC's too.
func TestTrainOverMutualTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secret")
	tlstest.NewCA(t, "cluster CA").Dir(t, dir)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"flag", []string{"--tls_dir", dir}},
		{"variable", nil},
		{"grpc", []string{"--tls_dir", dir, "--protocol", "grpc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.args == nil {
				t.Setenv(cluster.EnvTLSDir, dir)
			}
			args := append([]string{"train", "--steps", "60", "--vocab", "5000", "--held_out", "1024"}, tc.args...)
			code, out, errOut := runMain(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errOut, out)
			}
			if initial, final := heldOutLoss(t, out); final >= initial {
				t.Errorf("held-out loss %.4f -> %.4f over mutual TLS", initial, final)
			}
			if !strings.Contains(out, "mutual TLS 1.3 on gRPC and starwire over TCP") {
				t.Errorf("train does not say its calls use TLS:\n%s", out)
			}
			if strings.Contains(errOut, "client refused") {
				t.Errorf("a task refused one of the cluster's own clients:\n%s", errOut)
			}
		})
	}
}

func TestTLSFlagErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secret")
	files := tlstest.NewCA(t, "cluster CA").Dir(t, dir)
	code, _, errOut := runMain(t, "train", "--tls_cert", files.Cert, "--tls_ca", files.CA)
	if code != 2 || !strings.Contains(errOut, "give --tls_key") {
		t.Errorf("a certificate without its key: exit %d: %s", code, errOut)
	}
	code, _, errOut = runMain(t, "serve", "--tls_dir", dir, "--tls_key", files.CA, "--job", "ps", "--cluster", "ps=127.0.0.1:1;worker=127.0.0.1:2", "--protocol", "grpc")
	if code != 2 || !strings.Contains(errOut, "tcp: tls files") {
		t.Errorf("a key that is no key: exit %d: %s", code, errOut)
	}
	t.Setenv(cluster.EnvTLSCA, filepath.Join(dir, "missing.crt"))
	code, _, errOut = runMain(t, "health", "--addr", "127.0.0.1:1")
	if code != 2 || !strings.Contains(errOut, cluster.EnvTLSCA+"=") {
		t.Errorf("a CA bundle that is not there: exit %d: %s", code, errOut)
	}
}

// TestServeOverMutualTLS runs a ps and a worker as serve processes with
// mutual TLS from a secret directory in their environment, probes them with
// health over both ports, with and without the certificates, and trains
// against them.
func TestServeOverMutualTLS(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	secret := filepath.Join(t.TempDir(), "secret")
	tlstest.NewCA(t, "cluster CA").Dir(t, secret)
	reg := t.TempDir()
	env := []string{cluster.EnvTLSDir + "=" + secret}
	var servers []*process
	for _, job := range []string{"ps", "worker"} {
		servers = append(servers, startBinary(t, env, "serve", "--job", job, "--task", "0", "--ps", "1", "--workers", "1",
			"--registry_dir", reg, "--report", "0"))
	}
	var grpcAddr, starAddr string
	for _, s := range servers {
		line := s.waitLine(t, regexp.MustCompile(`serving: `), 30*time.Second)
		if !strings.Contains(line, "mutual TLS 1.3 on gRPC and starwire over TCP") {
			t.Errorf("serve does not say it uses TLS: %s", line)
		}
		if m := regexp.MustCompile(`serving: grpc (\S+), starwire (\S+) `).FindStringSubmatch(line); m != nil {
			grpcAddr, starAddr = strings.TrimSuffix(m[1], ","), m[2]
		}
	}
	if grpcAddr == "" {
		t.Fatal("no addresses in the serving lines")
	}
	for _, args := range [][]string{{"--addr", grpcAddr}, {"--starwire", "--addr", starAddr}} {
		if code, out, errOut := runBinary(t, env, append([]string{"health", "--timeout", "5s"}, args...)...); code != 0 || !strings.Contains(out, "SERVING") {
			t.Errorf("health %v with the certificates: exit %d: %s%s", args, code, out, errOut)
		}
		// Refused in its own protocol, with the command's words for where
		// the files go.
		if code, out, errOut := runBinary(t, nil, append([]string{"health", "--timeout", "2s"}, args...)...); code == 0 || !strings.Contains(out+errOut, "(--tls_dir or $"+cluster.EnvTLSDir+")") {
			t.Errorf("health %v in plaintext: exit %d: %s%s", args, code, out, errOut)
		}
	}
	// Without the certificates, train fails at the tasks' first answer
	// with their reason, rather than after --connect_timeout.
	code, _, errOut := runBinary(t, nil, "train", "--registry_dir", reg, "--ps", "1", "--workers", "1", "--steps", "50", "--connect_timeout", "10m")
	if code != 1 || !strings.Contains(errOut, "cluster refused this client") || !strings.Contains(errOut, "requires mutual TLS") {
		t.Errorf("train without TLS against a TLS cluster: exit %d: %s", code, errOut)
	}
	code, out, errOut := runBinary(t, env, "train", "--registry_dir", reg, "--ps", "1", "--workers", "1", "--steps", "50", "--vocab", "5000", "--held_out", "1024", "--connect_timeout", "20s")
	if code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errOut, out)
	}
	if initial, final := heldOutLoss(t, out); final >= initial {
		t.Errorf("held-out loss %.4f -> %.4f", initial, final)
	}
	for _, s := range servers {
		if code := s.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("serve exited %d on SIGTERM:\n%s", code, s.stderr.String())
		}
		// The plaintext clients were refused, and the task logged it in
		// the command's one format, not slog's key=value records.
		errs := s.stderr.String()
		if !strings.Contains(errs, "warning: tcp: tls: client refused peer=") || strings.Contains(errs, "level=") || strings.Contains(errs, "time=") {
			t.Errorf("serve's log of the refusals is not one plain line each:\n%s", errs)
		}
	}
}
