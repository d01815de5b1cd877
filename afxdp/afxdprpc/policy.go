package afxdprpc

import (
	"github.com/starwire/starwire/netpath"
)

// A PathPolicy says which calls of an upgraded connection take the packet
// session and which stay on TCP: netpath.Policy, which netpath.ParsePolicy
// reads from flags and STARWIRE_AFXDP_PATH. The zero value is PathAuto.
type PathPolicy = netpath.Policy

// PathMode is how a PathPolicy chooses.
type PathMode = netpath.PolicyMode

// The modes, as netpath defines them.
const (
	PathAuto      = netpath.PolicyAuto
	PathThreshold = netpath.PolicyThreshold
	PathAFXDP     = netpath.PolicyAFXDP
	PathTCPOnly   = netpath.PolicyTCP
)
