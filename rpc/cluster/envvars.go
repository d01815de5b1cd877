package cluster

// The environment variables starwire shares with TensorFlow's seastar
// protocol and DeepRec, and its own. This package is the only one that
// reads the environment: the functions below (and LoadTFConfig,
// LoadEndpointMap) read each variable and hand plain values down, so rpc,
// afxdp and handlers take options, never variables. EnvVars is the one
// list of them, with what each accepts; commands check it (CheckEnv)
// before they start.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/starwire/starwire/internal/units"
	"github.com/starwire/starwire/netpath"
)

// Variable names, as TensorFlow and DeepRec users know them.
const (
	EnvCoreNumber       = "SEASTAR_CORE_NUMBER"
	EnvPSCoreNumber     = "NETWORK_PS_CORE_NUMBER"
	EnvWorkerCoreNumber = "NETWORK_WORKER_CORE_NUMBER"
	EnvWorkerPolling    = "WORKER_ENABLE_POLLING"
	EnvPSPolling        = "PS_ENABLE_POLLING"
	EnvWorkerDisablePin = "WORKER_DISABLE_PIN_CORES"
	EnvPSDisablePin     = "PS_DISABLE_PIN_CORES"
	EnvEndpointMapPath  = "TF_SEASTAR_ENDPOINT_MAP_PATH"
	EnvTFConfig         = "TF_CONFIG"
	// EnvAFXDPPath is starwire's own: which calls of a connection with both
	// an AF_XDP session and TCP take AF_XDP.
	EnvAFXDPPath = "STARWIRE_AFXDP_PATH"

	// Mutual TLS for the TCP paths, as a Kubernetes secret is mounted: a
	// directory holding tls.crt, tls.key and ca.crt, or each file's path.
	EnvTLSDir  = "STARWIRE_TLS_DIR"
	EnvTLSCert = "STARWIRE_TLS_CERT"
	EnvTLSKey  = "STARWIRE_TLS_KEY"
	EnvTLSCA   = "STARWIRE_TLS_CA"

	// EnvPacketTicketFile names the file holding the ticket a task's packet
	// endpoints take sessions under (afxdp.Ticket), as a mounted secret.
	EnvPacketTicketFile = "STARWIRE_PACKET_TICKET_FILE"
)

// MaxReactors bounds the reactor counts. A reactor is worth having only with a
// connection of its own, and each costs a goroutine and its wake-ups; a
// larger value is a typing mistake, not a configuration.
const MaxReactors = 1024

// An EnvVar describes one variable for checks, help and documentation.
type EnvVar struct {
	Name    string
	Default string // what leaving it unset means
	Accepts string // the values it accepts, as "want ..." ends a message
	Doc     string // what it does, one line
	check   func(string) error
}

// EnvVars lists every variable starwire reads, in the order help shows them.
var EnvVars = []EnvVar{
	{EnvTFConfig, "unset: no cluster from the environment", "a JSON object with \"cluster\", \"task\" and optionally \"rpc_layer\"",
		"the cluster, this process's task and the protocol, as TensorFlow launchers set it", nil},
	{EnvEndpointMapPath, "./.endpoint_map", "a file path",
		"the endpoint map (grpcHost:port=starHost:port lines) that grpc+seastar reads", nil},
	{EnvCoreNumber, "4", countAccepts,
		"reactors of a process's TCP transport", checkCount},
	{EnvPSCoreNumber, "SEASTAR_CORE_NUMBER's value", countAccepts,
		"reactors of a ps task's TCP transport, at most one per connection", checkCount},
	{EnvWorkerCoreNumber, "SEASTAR_CORE_NUMBER's value", countAccepts,
		"reactors of a worker task's TCP transport, at most one per connection", checkCount},
	{EnvPSPolling, "unset: poll 20µs after the last work, then sleep", boolAccepts,
		"true: a ps task's AF_XDP reactors poll without sleeping (a core each); false: they sleep as soon as idle", checkBool},
	{EnvWorkerPolling, "unset: poll 20µs after the last work, then sleep", boolAccepts,
		"the same for a worker task", checkBool},
	{EnvPSDisablePin, "true", boolAccepts,
		"false: pin a ps task's AF_XDP reactor to a CPU", checkBool},
	{EnvWorkerDisablePin, "true", boolAccepts,
		"the same for a worker task", checkBool},
	{EnvAFXDPPath, "auto: each call over the path measured faster for its size", pathAccepts,
		"which calls between tasks joined by AF_XDP take it rather than TCP: auto, afxdp (all), tcp (none), or those below a size; bypass and always are aliases of afxdp, never of tcp", checkPath},
	{EnvTLSDir, "unset: no TLS unless the files are named", "a directory holding tls.crt, tls.key and ca.crt",
		"mutual TLS 1.3 on gRPC and starwire's TCP transport with the files of this directory (a mounted kubernetes.io/tls secret)", checkTLSDir},
	{EnvTLSCert, "$STARWIRE_TLS_DIR/tls.crt", fileAccepts,
		"the PEM certificate this process presents, for the name (or IP) its peers dial; reread when it changes", checkFile},
	{EnvTLSKey, "$STARWIRE_TLS_DIR/tls.key", fileAccepts,
		"the certificate's PEM private key", checkFile},
	{EnvTLSCA, "$STARWIRE_TLS_DIR/ca.crt", fileAccepts,
		"the PEM bundle of the CAs whose certificates peers must present", checkFile},
	{EnvPacketTicketFile, "unset: packet sessions only within the process, unless --packet_ticket_file or --insecure_packet_path", fileAccepts,
		"a file holding the packet ticket every task of the cluster holds (80 hex digits: openssl rand -hex 40; a mounted secret): only its holders open packet sessions with the task", checkFile},
}

// TLSDirFiles are the names of the files in a STARWIRE_TLS_DIR, as a
// kubernetes.io/tls secret (with cert-manager's ca.crt) holds them.
var TLSDirFiles = [3]string{"tls.crt", "tls.key", "ca.crt"}

const (
	countAccepts = "a whole number from 1 to 1024"
	boolAccepts  = "true or false (also 1 or 0, any case)"
	pathAccepts  = netpath.PolicyAccepts
	fileAccepts  = "the path of a readable file"
)

// LookupEnvVar returns the description of the variable called name.
func LookupEnvVar(name string) (EnvVar, bool) {
	for _, v := range EnvVars {
		if v.Name == name {
			return v, true
		}
	}
	return EnvVar{}, false
}

// CheckEnv reports the first of the named variables that is set to a value
// it does not accept, in one line that names it, its value and what it
// accepts: SEASTAR_CORE_NUMBER="abc": want a whole number from 1 to 1024.
// Unset or empty variables are fine; unknown names are ignored.
func CheckEnv(names ...string) error {
	for _, name := range names {
		v, ok := LookupEnvVar(name)
		val := getenv(name)
		if !ok || v.check == nil || strings.TrimSpace(val) == "" {
			continue
		}
		if err := v.check(val); err != nil {
			return fmt.Errorf("%s=%q: want %s", name, val, v.Accepts)
		}
	}
	return nil
}

func checkFile(s string) error {
	f, err := os.Open(s)
	if err != nil {
		return err
	}
	return f.Close()
}

func checkTLSDir(s string) error {
	for _, name := range TLSDirFiles {
		if err := checkFile(filepath.Join(s, name)); err != nil {
			return err
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

// checkPath accepts what netpath.ParsePolicy reads.
func checkPath(s string) error {
	_, err := netpath.ParsePolicy(s)
	return err
}

// Check reports whether v accepts value; nil for a variable that accepts
// anything.
func (v EnvVar) Check(value string) error {
	if v.check == nil {
		return nil
	}
	return v.check(value)
}

// parseCount reads a reactor count, a whole number in 1..MaxReactors.
func parseCount(s string) (int, error) { return units.ParseCount(s, 1, MaxReactors) }

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

// getenv is the one read of the environment: every variable of EnvVars
// is read through it.
func getenv(name string) string { return os.Getenv(name) }

// envCount reads a reactor count: ok is false when the variable is unset
// or not a whole number in 1..MaxReactors (CheckEnv reports the latter).
func envCount(name string) (n int, ok bool) {
	n, err := parseCount(getenv(name))
	return n, err == nil
}

// envBool reads a boolean variable; ok is false when it is unset or
// unparsable (CheckEnv reports the latter).
func envBool(name string) (v, ok bool) {
	v, err := parseBool(getenv(name))
	return v, err == nil
}

// PacketPolling reads how a task of job ("ps", or any other job for a
// worker) wants its AF_XDP reactors to wait, from PS_ENABLE_POLLING or
// WORKER_ENABLE_POLLING: set says the variable holds a boolean, busy is
// its value (afxdp.TaskOptions takes both).
func PacketPolling(job string) (busy, set bool) {
	if job == "ps" {
		return envBool(EnvPSPolling)
	}
	return envBool(EnvWorkerPolling)
}

// PinPacketReactors reports whether a task of job pins its AF_XDP reactors
// to CPUs: PS_DISABLE_PIN_CORES or WORKER_DISABLE_PIN_CORES set to false.
func PinPacketReactors(job string) bool {
	name := EnvWorkerDisablePin
	if job == "ps" {
		name = EnvPSDisablePin
	}
	disable, ok := envBool(name)
	return ok && !disable
}

// AFXDPPath returns STARWIRE_AFXDP_PATH, trimmed, or "auto" when it is
// unset or blank; netpath.ParsePolicy reads it.
func AFXDPPath() string {
	if v := strings.TrimSpace(getenv(EnvAFXDPPath)); v != "" {
		return v
	}
	return "auto"
}

// TLSFiles returns STARWIRE_TLS_DIR and the files STARWIRE_TLS_CERT,
// STARWIRE_TLS_KEY and STARWIRE_TLS_CA name, in TLSDirFiles' order; ""
// for each that is unset.
func TLSFiles() (dir string, files [3]string) {
	return getenv(EnvTLSDir), [3]string{getenv(EnvTLSCert), getenv(EnvTLSKey), getenv(EnvTLSCA)}
}

// PacketTicketFile returns STARWIRE_PACKET_TICKET_FILE, "" when unset.
func PacketTicketFile() string { return getenv(EnvPacketTicketFile) }
