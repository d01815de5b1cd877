package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// A TFConfig is the TF_CONFIG environment variable that TensorFlow's
// launchers (Estimator, distribution strategies, cluster schedulers) give
// each process:
//
//	{"cluster": {"ps": ["h:2222"], "worker": ["h:2223", "h:2224"]},
//	 "task": {"type": "worker", "index": 1},
//	 "rpc_layer": "grpc+seastar", "environment": "cloud"}
type TFConfig struct {
	// Cluster is "cluster": each job a list of addresses, or an object from
	// task index to address for a sparse job.
	Cluster Spec
	// TaskType and TaskIndex name this process's task ("task"); the index
	// defaults to 0, as in TensorFlow.
	TaskType  string
	TaskIndex int
	// RPCLayer is "rpc_layer", parsed by ParseProtocol; empty when absent,
	// so that the caller's own default or flag applies.
	RPCLayer Protocol
	// Environment is "environment" ("cloud", "google"), kept for callers
	// that branch on it.
	Environment string
}

// The coordinator's and the evaluator's task types: they may run outside
// the cluster (an evaluator always does in TensorFlow's layout; a
// coordinator that only drives the job need not serve), so their type need
// not be a job of the cluster.
const (
	taskChief     = "chief"
	taskEvaluator = "evaluator"
)

// LoadTFConfig parses the TF_CONFIG environment variable. Unset or blank,
// it returns ok=false and no error: the process was not launched with one.
func LoadTFConfig() (cfg TFConfig, ok bool, err error) {
	v := getenv(EnvTFConfig)
	if strings.TrimSpace(v) == "" {
		return TFConfig{}, false, nil
	}
	cfg, err = ParseTFConfig([]byte(v))
	if err != nil {
		return TFConfig{}, false, err
	}
	return cfg, true, nil
}

// ParseTFConfig parses TF_CONFIG's JSON. Unknown fields are ignored. Errors
// say what is wrong and where: malformed JSON (with the byte offset), a
// value of the wrong kind, a bad cluster address, an unknown rpc_layer, a
// cluster without a task type, a task type that is not a job (but for
// "chief" and "evaluator", which may run outside the cluster), or a task
// index the job does not have.
func ParseTFConfig(data []byte) (TFConfig, error) {
	var raw struct {
		Cluster *Spec `json:"cluster"`
		Task    *struct {
			Type  string          `json:"type"`
			Index json.RawMessage `json:"index"`
		} `json:"task"`
		RPCLayer    string `json:"rpc_layer"`
		Environment string `json:"environment"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
			return TFConfig{}, fmt.Errorf("cluster: %s: invalid JSON at byte %d: %w", EnvTFConfig, se.Offset, err)
		}
		return TFConfig{}, fmt.Errorf("cluster: %s: %w", EnvTFConfig, jsonTypeError(err, tfConfigShape))
	}
	cfg := TFConfig{Environment: raw.Environment}
	if raw.Cluster != nil {
		cfg.Cluster = *raw.Cluster
	}
	if raw.RPCLayer != "" {
		p, err := parseProtocol(raw.RPCLayer)
		if err != nil {
			return TFConfig{}, fmt.Errorf("cluster: %s: rpc_layer: %w", EnvTFConfig, err)
		}
		cfg.RPCLayer = p
	}
	if raw.Task != nil {
		cfg.TaskType = strings.TrimSpace(raw.Task.Type)
		idx, err := parseTaskIndex(raw.Task.Index)
		if err != nil {
			return TFConfig{}, fmt.Errorf("cluster: %s: task: %w", EnvTFConfig, err)
		}
		cfg.TaskIndex = idx
	}
	if err := cfg.check(); err != nil {
		return TFConfig{}, fmt.Errorf("cluster: %s: %w", EnvTFConfig, err)
	}
	return cfg, nil
}

// parseTaskIndex accepts a JSON integer or a string holding one, as
// TensorFlow's int(task["index"]) does; absent means 0.
func parseTaskIndex(v json.RawMessage) (int, error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return 0, nil
	}
	s := string(v)
	if v[0] == '"' {
		if err := json.Unmarshal(v, &s); err != nil {
			return 0, fmt.Errorf("index %s: %w", v, err)
		}
		s = strings.TrimSpace(s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("index %s is not a non-negative integer", v)
	}
	return n, nil
}

// check ties the task to the cluster: with a cluster there must be a task
// type, and the task must be one the cluster defines.
func (c TFConfig) check() error {
	if c.Cluster.Len() == 0 {
		return nil
	}
	switch {
	case c.TaskType == "":
		return errors.New("cluster is set but task.type is not")
	case c.Cluster.NumTasks(c.TaskType) == 0:
		if c.TaskType == taskEvaluator || c.TaskType == taskChief {
			return nil
		}
		return fmt.Errorf("task type %q is not a job of the cluster (jobs: %s)",
			c.TaskType, strings.Join(c.Cluster.Jobs(), ", "))
	}
	if _, err := c.Cluster.Lookup(c.TaskType, c.TaskIndex); err != nil {
		return fmt.Errorf("task index %d out of range: job %q has tasks %s",
			c.TaskIndex, c.TaskType, describeIndices(c.Cluster.TaskIndices(c.TaskType)))
	}
	return nil
}

// TaskName returns this process's task name, "/job:worker/replica:0/task:1".
func (c TFConfig) TaskName() string { return TaskName(c.TaskType, c.TaskIndex) }

// Addr returns this process's own address in the cluster.
func (c TFConfig) Addr() (string, error) { return c.Cluster.Lookup(c.TaskType, c.TaskIndex) }

// tfConfigShape is TF_CONFIG's layout as messages describe it.
const tfConfigShape = `an object {"cluster": {...}, "task": {"type": ..., "index": ...}, "rpc_layer": ...}`

// jsonTypeError rewrites encoding/json's type errors, which name Go types
// ("cannot unmarshal array into Go value of type struct { Cluster
// *cluster.Spec ..."), in the words of the JSON: which field holds what,
// and what it should hold. top describes the whole document.
func jsonTypeError(err error, top string) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	if te.Field == "" {
		return fmt.Errorf("want %s, got %s", top, jsonKind(te.Value))
	}
	return fmt.Errorf("%s: want %s, got %s", te.Field, goKind(te.Type), jsonKind(te.Value))
}

// typeErrorKind names the kind of JSON value a type error was about, or
// describes any other error.
func typeErrorKind(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return jsonKind(te.Value)
	}
	return err.Error()
}

// jsonKind names a JSON value kind as json.UnmarshalTypeError gives it.
func jsonKind(v string) string {
	switch v {
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "null":
		return "null"
	}
	if strings.HasPrefix(v, "number") {
		return "a number"
	}
	return v
}

// goKind names the JSON a Go type decodes.
func goKind(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	}
	return "a number"
}
