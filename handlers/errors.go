package handlers

import (
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// errStepCleaned is what receivers of a step see once it is cleaned up.
var errStepCleaned = status.Errorf(wire.Aborted, "step cleaned up")
