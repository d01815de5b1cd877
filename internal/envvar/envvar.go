// Package envvar reads the environment variables starwire shares with
// TensorFlow's seastar protocol and DeepRec, so that rpc, rpc/cluster,
// afxdp and the command parse them alike. Vars is the one list of them, with
// what each accepts; commands check it before they start.
package envvar

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Variable names, as TensorFlow and DeepRec users know them.
const (
	CoreNumber       = "SEASTAR_CORE_NUMBER"
	PSCoreNumber     = "NETWORK_PS_CORE_NUMBER"
	WorkerCoreNumber = "NETWORK_WORKER_CORE_NUMBER"
	WorkerPolling    = "WORKER_ENABLE_POLLING"
	PSPolling        = "PS_ENABLE_POLLING"
	WorkerDisablePin = "WORKER_DISABLE_PIN_CORES"
	PSDisablePin     = "PS_DISABLE_PIN_CORES"
	EndpointMapPath  = "TF_SEASTAR_ENDPOINT_MAP_PATH"
	TFConfig         = "TF_CONFIG"
)

// MaxCount bounds the reactor counts. A reactor is worth having only with a
// connection of its own, and each costs a goroutine and its wake-ups; a
// larger value is a typing mistake, not a configuration.
const MaxCount = 1024

// A Var describes one variable for checks, help and documentation.
type Var struct {
	Name    string
	Default string // what leaving it unset means
	Accepts string // the values it accepts, as "want ..." ends a message
	Doc     string // what it does, one line
	check   func(string) error
}

// Vars lists every variable starwire reads, in the order help shows them.
var Vars = []Var{
	{TFConfig, "unset: no cluster from the environment", "a JSON object with \"cluster\", \"task\" and optionally \"rpc_layer\"",
		"the cluster, this process's task and the protocol, as TensorFlow launchers set it", nil},
	{EndpointMapPath, "./.endpoint_map", "a file path",
		"the endpoint map (grpcHost:port=starHost:port lines) that grpc+seastar reads", nil},
	{CoreNumber, "4", countAccepts,
		"reactors of a process's TCP transport", checkCount},
	{PSCoreNumber, "SEASTAR_CORE_NUMBER's value", countAccepts,
		"reactors of a ps task's TCP transport, at most one per connection", checkCount},
	{WorkerCoreNumber, "SEASTAR_CORE_NUMBER's value", countAccepts,
		"reactors of a worker task's TCP transport, at most one per connection", checkCount},
	{PSPolling, "unset: poll 20µs after the last work, then sleep", boolAccepts,
		"true: a ps task's AF_XDP reactors poll without sleeping (a core each); false: they sleep as soon as idle", checkBool},
	{WorkerPolling, "unset: poll 20µs after the last work, then sleep", boolAccepts,
		"the same for a worker task", checkBool},
	{PSDisablePin, "true", boolAccepts,
		"false: pin a ps task's AF_XDP reactor to a CPU", checkBool},
	{WorkerDisablePin, "true", boolAccepts,
		"the same for a worker task", checkBool},
}

const (
	countAccepts = "a whole number from 1 to 1024"
	boolAccepts  = "true or false (also 1 or 0, any case)"
)

// Lookup returns the description of the variable called name.
func Lookup(name string) (Var, bool) {
	for _, v := range Vars {
		if v.Name == name {
			return v, true
		}
	}
	return Var{}, false
}

// Check reports the first of the named variables that is set to a value it
// does not accept, in one line that names it, its value and what it
// accepts: SEASTAR_CORE_NUMBER="abc": want a whole number from 1 to 1024.
// Unset or empty variables are fine; unknown names are ignored.
func Check(names ...string) error {
	for _, name := range names {
		v, ok := Lookup(name)
		val, set := os.LookupEnv(name)
		if !ok || !set || v.check == nil || strings.TrimSpace(val) == "" {
			continue
		}
		if err := v.check(val); err != nil {
			return fmt.Errorf("%s=%q: want %s", name, val, v.Accepts)
		}
	}
	return nil
}

func checkCount(s string) error {
	_, err := parseCount(s)
	return err
}

func checkBool(s string) error {
	_, err := parseBool(s)
	return err
}

func parseCount(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > MaxCount {
		return 0, fmt.Errorf("not in 1..%d", MaxCount)
	}
	return n, nil
}

// parseBool accepts what TensorFlow's ReadBoolFromEnvVar does: true,
// false, 1 or 0, in any case.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("not a boolean")
}

// Count reads a reactor count: ok is false when the variable is unset or
// not a whole number in 1..MaxCount (Check reports the latter).
func Count(name string) (n int, ok bool) {
	n, err := parseCount(os.Getenv(name))
	return n, err == nil
}

// Bool reads a boolean variable (true, false, 1 or 0, any case); def when
// it is unset or unparsable.
func Bool(name string, def bool) bool {
	if v, ok := BoolSet(name); ok {
		return v
	}
	return def
}

// BoolSet reads a boolean variable like Bool; ok is false when it is unset
// or unparsable, for settings whose default is neither.
func BoolSet(name string) (v, ok bool) {
	v, err := parseBool(os.Getenv(name))
	return v, err == nil
}

// PositiveInt reads a positive integer; ok is false when the variable is
// unset, unparsable or not positive.
func PositiveInt(name string) (n int, ok bool) {
	n, err := strconv.Atoi(strings.TrimSpace(os.Getenv(name)))
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
