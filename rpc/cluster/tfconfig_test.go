package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "tf_config", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseTFConfigFiles(t *testing.T) {
	tests := []struct {
		file     string
		cluster  string
		taskType string
		index    int
		layer    Protocol
		env      string
		addr     string
	}{
		{"worker.json", "chief=10.0.0.5:2222;ps=10.0.0.1:2222,10.0.0.2:2222;worker=10.0.0.3:2222,10.0.0.4:2222",
			"worker", 1, ProtocolGRPCSeastar, "cloud", "10.0.0.4:2222"},
		{"ps_sparse.json", "ps=localhost:2222;worker=localhost:2224,localhost:2226",
			"worker", 3, "", "", "localhost:2226"},
		{"evaluator.json", "chief=host0:2222;ps=host2:2222;worker=host1:2222",
			"evaluator", 0, ProtocolGRPCSeastar, "cloud", ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, err := ParseTFConfig(readTestdata(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if c.Cluster.String() != tt.cluster || c.TaskType != tt.taskType || c.TaskIndex != tt.index ||
				c.RPCLayer != tt.layer || c.Environment != tt.env {
				t.Errorf("got %v %s:%d %q %q", c.Cluster, c.TaskType, c.TaskIndex, c.RPCLayer, c.Environment)
			}
			addr, err := c.Addr()
			if tt.addr == "" {
				if !errors.Is(err, ErrNoTask) {
					t.Errorf("Addr() = %q, %v; want ErrNoTask", addr, err)
				}
			} else if addr != tt.addr {
				t.Errorf("Addr() = %q, %v; want %q", addr, err, tt.addr)
			}
		})
	}
}

func TestParseTFConfigErrors(t *testing.T) {
	tests := []struct {
		name, in string
		is       error
		msg      string
	}{
		{"truncated", `{"cluster": {"ps": ["h:1"]}`, nil, "invalid JSON at byte"},
		{"not an object", `[1]`, nil, `want an object {"cluster": {...}, "task": {"type": ..., "index": ...}, "rpc_layer": ...}, got a list`},
		{"a string", `"x"`, nil, "got a string"},
		{"cluster a number", `{"cluster": 5}`, nil, "cluster: want an object of job to addresses, got a number"},
		{"task a string", `{"task": "worker"}`, nil, "task: want an object, got a string"},
		{"task type a number", `{"task": {"type": 1}}`, nil, "task.type: want a string, got a number"},
		{"rpc_layer a number", `{"rpc_layer": 5}`, nil, "rpc_layer: want a string, got a number"},
		{"job a string", `{"cluster": {"ps": "h:1"}}`, nil, `job "ps": want a list of host:port or an object of task index to host:port, got a string`},
		{"address a number", `{"cluster": {"ps": [5]}}`, nil, `job "ps": want host:port strings in the list, got a number`},
		{"sparse address a number", `{"cluster": {"ps": {"0": 5}}}`, nil, `job "ps": want host:port strings as the object's values, got a number`},
		{"trailing garbage", `{} x`, nil, "invalid JSON at byte 4"},
		{"index out of range", string(readTestdata(t, "index_out_of_range.json")), nil,
			`task index 2 out of range: job "worker" has tasks 0-1`},
		{"sparse index missing", `{"cluster": {"worker": {"1": "h:1"}}, "task": {"type": "worker", "index": 0}}`, nil,
			`task index 0 out of range: job "worker" has tasks 1`},
		{"negative index", `{"cluster": {"ps": ["h:1"]}, "task": {"type": "ps", "index": -1}}`, nil, "not a non-negative integer"},
		{"fractional index", `{"cluster": {"ps": ["h:1"]}, "task": {"type": "ps", "index": 0.5}}`, nil, "not a non-negative integer"},
		{"index not a number", `{"cluster": {"ps": ["h:1"]}, "task": {"type": "ps", "index": "one"}}`, nil, "not a non-negative integer"},
		{"no task", `{"cluster": {"ps": ["h:1"]}}`, nil, "task.type is not"},
		{"unknown type", `{"cluster": {"ps": ["h:1"]}, "task": {"type": "worker"}}`, nil, `task type "worker" is not a job of the cluster (jobs: ps)`},
		{"bad address", `{"cluster": {"ps": ["h:1", "h"]}, "task": {"type": "ps"}}`, ErrBadAddress, "/job:ps/replica:0/task:1"},
		{"duplicate address", `{"cluster": {"ps": ["h:1"], "worker": ["h:1"]}, "task": {"type": "ps"}}`, ErrDuplicateAddress, "also used by"},
		{"unknown rpc_layer", `{"rpc_layer": "grpc+verbs"}`, ErrUnknownProtocol, "rpc_layer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTFConfig([]byte(tt.in))
			if err == nil || !strings.HasPrefix(err.Error(), "cluster: TF_CONFIG: ") || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want one with %q", err, tt.msg)
			}
			if strings.Contains(err.Error(), "Go ") {
				t.Errorf("%v names a Go type", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("%v does not wrap %v", err, tt.is)
			}
		})
	}
}

// TestParseTFConfigChief: the coordinator's TF_CONFIG names its task
// "chief", whether or not the cluster lists a chief job (Kubeflow's TFJob
// lists it; a driver outside the cluster need not be).
func TestParseTFConfigChief(t *testing.T) {
	for _, in := range []string{
		`{"cluster": {"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3"]}, "task": {"type": "chief", "index": 0}}`,
		`{"cluster": {"ps": ["h:2"], "worker": ["h:3"]}, "task": {"type": "chief", "index": 0}}`,
	} {
		c, err := ParseTFConfig([]byte(in))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if c.TaskName() != "/job:chief/replica:0/task:0" || c.Cluster.NumTasks("ps") != 1 {
			t.Errorf("%s: parsed as %+v", in, c)
		}
	}
}

func TestParseTFConfigDefaults(t *testing.T) {
	c, err := ParseTFConfig([]byte(`{"cluster": {"chief": ["h:1"]}, "task": {"type": "chief"}, "session_master": "x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.TaskIndex != 0 || c.TaskName() != "/job:chief/replica:0/task:0" || c.RPCLayer != "" {
		t.Errorf("defaults: %+v", c)
	}
	c, err = ParseTFConfig([]byte(`{}`))
	if err != nil || c.Cluster.Len() != 0 || c.TaskType != "" {
		t.Errorf("empty object: %+v, %v", c, err)
	}
}

func TestLoadTFConfig(t *testing.T) {
	t.Setenv(EnvTFConfig, "")
	if _, ok, err := LoadTFConfig(); ok || err != nil {
		t.Errorf("blank: ok %v, err %v", ok, err)
	}
	os.Unsetenv(EnvTFConfig) // t.Setenv restores it after the test
	if _, ok, err := LoadTFConfig(); ok || err != nil {
		t.Errorf("unset: ok %v, err %v", ok, err)
	}
	t.Setenv(EnvTFConfig, string(readTestdata(t, "worker.json")))
	c, ok, err := LoadTFConfig()
	if !ok || err != nil || c.TaskName() != "/job:worker/replica:0/task:1" {
		t.Errorf("set: %+v, ok %v, err %v", c, ok, err)
	}
	t.Setenv(EnvTFConfig, `{"cluster":`)
	if _, ok, err := LoadTFConfig(); ok || err == nil {
		t.Errorf("malformed: ok %v, err %v", ok, err)
	}
}

// FuzzParseTFConfig checks that no input panics and that an accepted config
// names a task its cluster has (or an evaluator, or has no cluster).
func FuzzParseTFConfig(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "tf_config", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseTFConfig(data)
		if err != nil {
			if strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "Go struct") {
				t.Fatalf("error names a Go type: %v", err)
			}
			return
		}
		if c.Cluster.Len() == 0 || (c.TaskType == taskEvaluator || c.TaskType == taskChief) && c.Cluster.NumTasks(c.TaskType) == 0 {
			return
		}
		if _, err := c.Addr(); err != nil {
			t.Fatalf("accepted a config whose task is not in its cluster: %v", err)
		}
	})
}
