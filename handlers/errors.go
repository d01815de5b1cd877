package handlers

import (
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// errStepCleaned is what receivers of a step see once it is cleaned up.
var errStepCleaned = rpc.Errorf(wire.Aborted, "step cleaned up")
