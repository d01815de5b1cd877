package handlers

import (
	"errors"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// ErrBadKey is wrapped by errors from ParseKey and ParseDevice.
var ErrBadKey = errors.New("handlers: malformed rendezvous key")

// errBadTensor is wrapped by errors from NewTensor.
var errBadTensor = errors.New("bad tensor")

// errStepCleaned is what receivers of a step see once it is cleaned up.
var errStepCleaned = rpc.Errorf(wire.Aborted, "step cleaned up")
