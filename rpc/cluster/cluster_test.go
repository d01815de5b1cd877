package cluster

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in   string
		want map[string][]string
	}{
		{"ps=h0:2222", map[string][]string{"ps": {"h0:2222"}}},
		{"ps=10.0.0.1:2222,10.0.0.2:2222;worker=10.0.0.3:2222", map[string][]string{
			"ps": {"10.0.0.1:2222", "10.0.0.2:2222"}, "worker": {"10.0.0.3:2222"}}},
		{" worker = a:1 , b:2 ; chief=c:3; ", map[string][]string{
			"worker": {"a:1", "b:2"}, "chief": {"c:3"}}},
		{"ps=[::1]:2222;Worker_2=localhost:2223", map[string][]string{
			"ps": {"[::1]:2222"}, "Worker_2": {"localhost:2223"}}},
		{"", map[string][]string{}},
	}
	for _, tt := range tests {
		c, err := ParseSpec(tt.in)
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", tt.in, err)
			continue
		}
		want, err := NewSpec(tt.want)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Equal(want) {
			t.Errorf("ParseSpec(%q) = %v, want %v", tt.in, c, want)
		}
		for job, addrs := range tt.want {
			if !slices.Equal(c.Tasks(job), addrs) || c.NumTasks(job) != len(addrs) {
				t.Errorf("ParseSpec(%q): job %s tasks %v, want %v", tt.in, job, c.Tasks(job), addrs)
			}
		}
	}
}

func TestParseSpecErrors(t *testing.T) {
	tests := []struct {
		in  string
		is  error
		msg string
	}{
		{"ps", nil, "no '='"},
		{"ps=", nil, `job "ps" has no tasks`},
		{"=h:1", nil, "empty job name"},
		{"1ps=h:1", nil, `bad job name "1ps"`},
		{"ps-0=h:1", nil, `bad job name "ps-0"`},
		{"ps=h:1;ps=h:2", nil, `job "ps" given twice`},
		{"ps=h:1,,h:3", ErrBadAddress, "/job:ps/replica:0/task:1: bad host:port \"\""},
		{"ps=h:1;worker=h:2,h", ErrBadAddress, "/job:worker/replica:0/task:1: bad host:port \"h\": missing port"},
		{"ps=h:0", ErrBadAddress, "port 0"},
		{"ps=h:99999", ErrBadAddress, "out of range"},
		{"ps=h:1;worker=h:2,h:1", ErrDuplicateAddress, "/job:worker/replica:0/task:1: duplicate address h:1, also used by /job:ps/replica:0/task:0"},
	}
	for _, tt := range tests {
		_, err := ParseSpec(tt.in)
		if err == nil || !strings.HasPrefix(err.Error(), "cluster: cluster spec ") || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseSpec(%q) = %v, want an error with %q", tt.in, err, tt.msg)
			continue
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("ParseSpec(%q): %v does not wrap %v", tt.in, err, tt.is)
		}
	}
}

func TestSpecAsRepeatedFlag(t *testing.T) {
	var c Spec
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	fs.Var(&c, "cluster", "job=host:port,...")
	if err := fs.Parse([]string{"--cluster", "ps=h:1", "--cluster=worker=h:2,h:3"}); err != nil {
		t.Fatal(err)
	}
	if got := c.String(); got != "ps=h:1;worker=h:2,h:3" {
		t.Errorf("String() = %q", got)
	}
	if err := fs.Parse([]string{"--cluster", "worker=h:4"}); err == nil {
		t.Error("a job given twice across flags was accepted")
	}
	if got := c.String(); got != "ps=h:1;worker=h:2,h:3" {
		t.Errorf("a failed Set changed the cluster: %q", got)
	}
}

func TestSpecLookup(t *testing.T) {
	c, err := ParseSpec("ps=h:1,h:2;worker=h:3")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddTask("chief", 4, "h:9"); err != nil {
		t.Fatal(err)
	}
	if a, err := c.Lookup("ps", 1); err != nil || a != "h:2" {
		t.Errorf("Lookup(ps, 1) = %q, %v", a, err)
	}
	tests := []struct {
		job  string
		task int
		msg  string
	}{
		{"ps", 2, `cluster: /job:ps/replica:0/task:2: no such task: job "ps" has tasks 0-1`},
		{"chief", 0, `cluster: /job:chief/replica:0/task:0: no such task: job "chief" has tasks 4`},
		{"evaluator", 0, `cluster: /job:evaluator/replica:0/task:0: no such task: job "evaluator" not in cluster (jobs: chief, ps, worker)`},
	}
	for _, tt := range tests {
		_, err := c.Lookup(tt.job, tt.task)
		if !errors.Is(err, ErrNoTask) || err.Error() != tt.msg {
			t.Errorf("Lookup(%s, %d):\n got %v\nwant %s", tt.job, tt.task, err, tt.msg)
		}
	}
	if got := c.Jobs(); !slices.Equal(got, []string{"chief", "ps", "worker"}) {
		t.Errorf("Jobs() = %v", got)
	}
	if c.NumTasks("chief") != 1 || c.NumTasks("nope") != 0 || c.Len() != 4 {
		t.Errorf("NumTasks(chief) = %d, NumTasks(nope) = %d, Len = %d", c.NumTasks("chief"), c.NumTasks("nope"), c.Len())
	}
	for _, bad := range []struct {
		job  string
		task int
		addr string
		msg  string
	}{
		{"ps", 0, "h:7", "task defined twice"},
		{"ps", -1, "h:7", "negative task index"},
		{"ps", 5, "h:3", "duplicate address h:3, also used by /job:worker/replica:0/task:0"},
		{"", 0, "h:7", "empty job name"},
	} {
		if err := c.AddTask(bad.job, bad.task, bad.addr); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("AddTask(%q, %d, %q) = %v, want %q", bad.job, bad.task, bad.addr, err, bad.msg)
		}
	}
	if c.Len() != 4 {
		t.Errorf("failed AddTask calls changed the cluster: Len = %d", c.Len())
	}
}

func TestSpecCloneIsIndependent(t *testing.T) {
	c, err := ParseSpec("ps=h:1")
	if err != nil {
		t.Fatal(err)
	}
	d := c.Clone()
	if err := d.AddTask("ps", 1, "h:2"); err != nil {
		t.Fatal(err)
	}
	if c.NumTasks("ps") != 1 || c.Equal(d) {
		t.Errorf("Clone shares storage: original now %v", c)
	}
	if err := c.AddTask("ps", 1, "h:3"); err != nil {
		t.Errorf("the original still owns task 1's slot: %v", err)
	}
}

func TestTaskNames(t *testing.T) {
	if got := TaskName("ps", 1); got != "/job:ps/replica:0/task:1" {
		t.Errorf("TaskName = %q", got)
	}
	good := []struct {
		name string
		job  string
		task int
	}{
		{"/job:ps/replica:0/task:1", "ps", 1},
		{"/job:worker/task:12", "worker", 12},
		{"/job:localhost/replica:0/task:0/device:CPU:0", "localhost", 0},
	}
	for _, tt := range good {
		job, task, err := ParseTaskName(tt.name)
		if err != nil || job != tt.job || task != tt.task {
			t.Errorf("ParseTaskName(%q) = %q, %d, %v", tt.name, job, task, err)
		}
	}
	for _, bad := range []string{"", "ps:1", "/job:ps", "/job:ps/replica:0", "/job:ps/task:x", "/job:ps/task:-1", "/job:/task:0", "/job:ps/task:+1", "/job:ps/replica:x/task:0", "/job:ps/replica:/task:0"} {
		if _, _, err := ParseTaskName(bad); err == nil {
			t.Errorf("ParseTaskName(%q) accepted", bad)
		}
	}
}

func TestSpecJSON(t *testing.T) {
	const in = `{"ps": ["h:1", "h:2"], "worker": {"1": "h:4", "3": "h:6"}}`
	var c Spec
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	if got := c.TaskIndices("worker"); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("worker indices %v", got)
	}
	if _, err := c.Lookup("worker", 0); !errors.Is(err, ErrNoTask) || !strings.Contains(err.Error(), "has tasks 1, 3") {
		t.Errorf("Lookup in a sparse job: %v", err)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"ps":["h:1","h:2"],"worker":{"1":"h:4","3":"h:6"}}` {
		t.Errorf("Marshal = %s", out)
	}
	var back Spec
	if err := json.Unmarshal(out, &back); err != nil || !back.Equal(c) {
		t.Errorf("round trip: %v, %v", back, err)
	}
	for _, bad := range []struct{ in, msg string }{
		{`{"ps": "h:1"}`, "want a list"},
		{`{"ps": []}`, "has no tasks"},
		{`{"ps": {}}`, "has no tasks"},
		{`{"ps": {"a": "h:1"}}`, `task index "a"`},
		{`{"ps": {"-1": "h:1"}}`, "negative task index"},
		{`{"ps": ["h:1"], "worker": ["h:1"]}`, "duplicate address"},
		{`{"ps": ["h"]}`, "missing port"},
		{`["h:1"]`, "want an object of job to addresses, got a list"},
	} {
		var c Spec
		if err := json.Unmarshal([]byte(bad.in), &c); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("Unmarshal(%s) = %v, want %q", bad.in, err, bad.msg)
		}
	}
}

func TestCheckAddr(t *testing.T) {
	for _, good := range []string{"h:1", "10.0.0.1:65535", "[::1]:2222", "[fe80::1%eth0]:1", "a-b_c.d:80", "host:0080"} {
		if err := CheckAddr(good); err != nil {
			t.Errorf("CheckAddr(%q): %v", good, err)
		}
	}
	for bad, why := range map[string]string{
		"":           "missing port",
		"h":          "missing port",
		":1":         "empty host",
		"h:":         "not a decimal",
		"h:0":        "port 0",
		"h:65536":    "out of range",
		"h:1x":       "not a decimal",
		"h h:1":      "bad host name",
		"::1:1":      "too many colons",
		"[::zz]:1":   "IPv6",
		"h:1:2":      "too many colons",
		"[h:1]":      "missing port",
		"h/x:1":      "bad host name",
		"héllo:2222": "bad host name",
	} {
		err := CheckAddr(bad)
		if !errors.Is(err, ErrBadAddress) || !strings.Contains(err.Error(), why) ||
			!strings.HasPrefix(err.Error(), fmt.Sprintf("cluster: bad host:port %q", bad)) {
			t.Errorf("CheckAddr(%q) = %v, want %q", bad, err, why)
		}
	}
}

// FuzzParseSpec checks that an accepted cluster holds only valid
// addresses and reads back from its String form unchanged.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"ps=10.0.0.1:2222,10.0.0.2:2222;worker=10.0.0.3:2222",
		" worker = a:1 , b:2 ; chief=c:3; ",
		"ps=[::1]:2222;Worker_2=localhost:2223",
		"ps=h:1;worker=h:2,h:1",
		"ps=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseSpec(s)
		if err != nil {
			return
		}
		for _, job := range c.Jobs() {
			if checkJobName(job) != nil || c.NumTasks(job) == 0 || !c.dense(job) {
				t.Fatalf("accepted job %q with tasks %v", job, c.TaskIndices(job))
			}
			for _, a := range c.Tasks(job) {
				if CheckAddr(a) != nil {
					t.Fatalf("accepted address %q", a)
				}
			}
		}
		back, err := ParseSpec(c.String())
		if err != nil || !back.Equal(c) {
			t.Fatalf("String %q reads back as %v, %v", c.String(), back, err)
		}
	})
}

func TestSpecSubset(t *testing.T) {
	c, err := ParseSpec("chief=h:1;ps=h:2,h:3;worker=h:4")
	if err != nil {
		t.Fatal(err)
	}
	s := c.Subset("ps", "worker", "evaluator")
	if got := s.String(); got != "ps=h:2,h:3;worker=h:4" {
		t.Errorf("Subset = %q", got)
	}
	if err := s.AddTask("chief", 0, "h:1"); err != nil {
		t.Errorf("the subset still owns the dropped address: %v", err)
	}
	if c.NumTasks("chief") != 1 {
		t.Error("Subset changed the original")
	}
}
