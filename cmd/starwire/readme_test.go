package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
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
