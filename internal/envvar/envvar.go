// Package envvar reads the environment variables starwire shares with
// TensorFlow's seastar protocol and DeepRec, so that rpc and afxdp parse
// them alike.
package envvar

import (
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

// Bool reads a "true"/"false" variable (any case, also 1/0); def when it
// is unset or unparsable.
func Bool(name string, def bool) bool {
	if v, ok := BoolSet(name); ok {
		return v
	}
	return def
}

// BoolSet reads a "true"/"false" variable like Bool; ok is false when it
// is unset or unparsable, for settings whose default is neither.
func BoolSet(name string) (v, ok bool) {
	v, err := strconv.ParseBool(strings.TrimSpace(os.Getenv(name)))
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
