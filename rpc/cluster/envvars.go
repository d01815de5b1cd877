// Package envvar reads the environment variables starwire shares with
// TensorFlow's seastar protocol and DeepRec, so that rpc, rpc/cluster,
// afxdp and the command parse them alike. Vars is the one list of them, with
// what each accepts; commands check it before they start.
package envvar

import (
	"fmt"
	"os"
	"path/filepath"
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
	// AFXDPPath is starwire's own: which calls of a connection with both
	// an AF_XDP session and TCP take AF_XDP.
	AFXDPPath = "STARWIRE_AFXDP_PATH"

	// Mutual TLS for the TCP paths, as a Kubernetes secret is mounted: a
	// directory holding tls.crt, tls.key and ca.crt, or each file's path.
	TLSDir  = "STARWIRE_TLS_DIR"
	TLSCert = "STARWIRE_TLS_CERT"
	TLSKey  = "STARWIRE_TLS_KEY"
	TLSCA   = "STARWIRE_TLS_CA"

	// PacketTicketFile names the file holding the ticket a task's packet
	// endpoints take sessions under (afxdp.Ticket), as a mounted secret.
	PacketTicketFile = "STARWIRE_PACKET_TICKET_FILE"
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
	{AFXDPPath, "auto: each call over the path measured faster for its size", pathAccepts,
		"which calls between tasks joined by AF_XDP take it rather than TCP: auto, bypass (all), tcp (none), or those below a size", checkPath},
	{TLSDir, "unset: no TLS unless the files are named", "a directory holding tls.crt, tls.key and ca.crt",
		"mutual TLS 1.3 on gRPC and starwire's TCP transport with the files of this directory (a mounted kubernetes.io/tls secret)", checkTLSDir},
	{TLSCert, "$STARWIRE_TLS_DIR/tls.crt", fileAccepts,
		"the PEM certificate this process presents, for the name (or IP) its peers dial; reread when it changes", checkFile},
	{TLSKey, "$STARWIRE_TLS_DIR/tls.key", fileAccepts,
		"the certificate's PEM private key", checkFile},
	{TLSCA, "$STARWIRE_TLS_DIR/ca.crt", fileAccepts,
		"the PEM bundle of the CAs whose certificates peers must present", checkFile},
	{PacketTicketFile, "unset: packet sessions only within the process, unless --packet_ticket_file or --insecure_packet_path", fileAccepts,
		"a file holding the packet ticket every task of the cluster holds (80 hex digits: openssl rand -hex 40; a mounted secret): only its holders open packet sessions with the task", checkFile},
}

// TLSDirFiles are the names of the files in a TLSDir, as a kubernetes.io/tls
// secret (with cert-manager's ca.crt) holds them.
var TLSDirFiles = [3]string{"tls.crt", "tls.key", "ca.crt"}

const (
	countAccepts = "a whole number from 1 to 1024"
	boolAccepts  = "true or false (also 1 or 0, any case)"
	pathAccepts  = "auto, bypass, tcp, or a size such as 64KiB or 65536"
	fileAccepts  = "the path of a readable file"
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

// checkPath accepts what afxdprpc.ParsePathPolicy does.
func checkPath(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto", "bypass", "always", "tcp", "never":
		return nil
	}
	t := strings.TrimSpace(s)
	for _, u := range []string{"KiB", "MiB", "GiB", "K", "M", "B"} {
		if strings.HasSuffix(t, u) {
			t = strings.TrimSuffix(t, u)
			break
		}
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64); err != nil || n <= 0 {
		return fmt.Errorf("not a path policy")
	}
	return nil
}
