package cluster

import (
	"errors"
	"fmt"
	"strings"
)

// A Protocol names how a task's services are carried, with the strings
// TensorFlow users pass as tf.train.Server's protocol or TF_CONFIG's
// rpc_layer.
type Protocol string

// The protocols starwire serves.
const (
	// ProtocolGRPC carries every service over gRPC, as stock TensorFlow does.
	ProtocolGRPC Protocol = "grpc"
	// ProtocolGRPCSeastar carries the worker service over starwire at the
	// address the endpoint map gives for each task, and keeps the gRPC
	// server for the master service at the task's cluster address.
	ProtocolGRPCSeastar Protocol = "grpc+seastar"
)

// ErrUnknownProtocol is returned (wrapped) by ParseProtocol for a name it
// does not accept.
var ErrUnknownProtocol = errors.New("unknown protocol")

// protocolAliases maps the names that select the starwire worker service in
// other TensorFlow distributions to ProtocolGRPCSeastar. Users switching from
// such a build set protocol="star_server" and expect it to take the fast
// path rather than fail; "star_server_lite" differs from "star_server" only
// in graph partitioning, which is not a transport matter, so both map to the
// same protocol.
var protocolAliases = map[string]Protocol{
	"star_server":      ProtocolGRPCSeastar,
	"star_server_lite": ProtocolGRPCSeastar,
}

// ParseProtocol returns the protocol named by s, ignoring case and
// surrounding spaces. The empty string means ProtocolGRPC, as an unset
// protocol does in TensorFlow. "star_server" and "star_server_lite" are
// accepted as aliases of ProtocolGRPCSeastar. Any other name is an error
// wrapping ErrUnknownProtocol that lists the valid names.
func ParseProtocol(s string) (Protocol, error) {
	p, err := parseProtocol(s)
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	return p, nil
}

func parseProtocol(s string) (Protocol, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	switch p := Protocol(name); p {
	case "":
		return ProtocolGRPC, nil
	case ProtocolGRPC, ProtocolGRPCSeastar:
		return p, nil
	}
	if p, ok := protocolAliases[name]; ok {
		return p, nil
	}
	return "", fmt.Errorf("protocol %q: %w (valid: %q, %q, or the aliases %q, %q of %q)",
		s, ErrUnknownProtocol, ProtocolGRPC, ProtocolGRPCSeastar,
		"star_server", "star_server_lite", ProtocolGRPCSeastar)
}

// UsesStar reports whether p carries the worker service over starwire, so
// that a task needs a second address from the endpoint map.
func (p Protocol) UsesStar() bool { return p == ProtocolGRPCSeastar }

// String returns the protocol's name.
func (p Protocol) String() string { return string(p) }
