package clustercmd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
)

// runCommand runs "starwire cluster" with args and returns its standard output.
// Commands that build a cluster need root and the built binary; their
// tests run it, in cmd/starwire.
func runCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout bytes.Buffer
	err := Run(t.Context(), args, &stdout)
	return stdout.String(), err
}

// TestUsage checks the command line is refused with a usage error
// (exit status 2) of one line.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give up, down, run, endpoints or manifests"},
		{[]string{"sideways"}, `unknown subcommand "sideways"`},
		{[]string{"up"}, "--name is required"},
		{[]string{"run", "--name", "Bad-Name"}, "--name: name \"Bad-Name\""},
		{[]string{"run", "--subnet", "10.0.0.0/24"}, "within 198.18.0.0/15"},
		{[]string{"run", "--workers", "0"}, "at least one of each"},
		{[]string{"run", "--paths", "afxdp,afxdp"}, "once each"},
		{[]string{"run", "--protocol", "grpc"}, "--paths afxdp needs --protocol grpc+seastar"},
		{[]string{"run", "--subnet", "198.18.0.0/30", "--ps", "2"}, "do not fit"},
		{[]string{"manifests", "--name", "Bad_Name"}, "want a DNS label"},
		{[]string{"manifests", "--ps", "0"}, "at least one of each"},
		{[]string{"manifests", "--image", ""}, "--image is empty"},
		{[]string{"manifests", "--image", "  "}, "--image is empty"},
		{[]string{"endpoints", "--port_offset", "0"}, "TF_CONFIG gives no cluster"},
	} {
		_, err := runCommand(t, tc.args...)
		var ue *flags.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v (%T); want a usage error of one line with %q", tc.args, err, err, tc.want)
		}
	}
}

// TestEndpoints writes the endpoint map of a TF_CONFIG's cluster,
// names resolved and not, as the Kubernetes init step does.
func TestEndpoints(t *testing.T) {
	t.Setenv("TF_CONFIG", `{"cluster":{"chief":["localhost:2222"],"ps":["127.0.0.1:3000"],"worker":["localhost:4000"]},"task":{"type":"ps","index":0}}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "localhost:2222=localhost:2223\n127.0.0.1:3000=127.0.0.1:3001\nlocalhost:4000=localhost:4001\n"},
		{[]string{"--resolve", "--port_offset", "-1000"}, "localhost:2222=127.0.0.1:1222\n127.0.0.1:3000=127.0.0.1:2000\nlocalhost:4000=127.0.0.1:3000\n"},
	} {
		out := filepath.Join(t.TempDir(), "map")
		stdout, err := runCommand(t, append([]string{"endpoints", "--out", out}, tc.args...)...)
		if err != nil || stdout != "wrote 3 tasks' starwire addresses to "+out+"\n" {
			t.Fatalf("%v: %v: %s", tc.args, err, stdout)
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(data), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, strings.ReplaceAll(l, " ", ""))
			}
		}
		slices.Sort(lines)
		want := strings.Split(strings.TrimSpace(tc.want), "\n")
		slices.Sort(want)
		if !slices.Equal(lines, want) {
			t.Errorf("%v: map %q, want %q", tc.args, lines, want)
		}
	}
	t.Setenv("TF_CONFIG", "")
	var ue *flags.UsageError
	if _, err := runCommand(t, "endpoints", "--out", filepath.Join(t.TempDir(), "m")); !errors.As(err, &ue) || !strings.Contains(err.Error(), "TF_CONFIG gives no cluster") {
		t.Errorf("without TF_CONFIG: %v (%T), want a usage error", err, err)
	}
}

// TestExistsHintNamesStateDir: "cluster up" over a cluster that exists in
// a --state_dir of the user's says how to remove it with that directory,
// since "cluster down" without it finds nothing to remove.
func TestExistsHintNamesStateDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "c1"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := buildCluster(shapeFlags{name: "c1", ps: 1, workers: 1, stateDir: dir}, 0)
	want := `"starwire cluster down --name c1 --state_dir ` + dir + `"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("cluster up over an existing cluster: %v; want the hint %s", err, want)
	}
}
