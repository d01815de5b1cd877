package handlers

import (
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/wire/tfpb"
)

// Env returns what the worker's kernels reach (its variables, rendezvous,
// remote receives), for a service that runs ops on the worker's state
// beside its graphs, as the eager service does. It must not be changed.
func (w *Worker) Env() *ops.Env { return w.env }

// DeviceAttributes returns the worker's devices, as GetStatus lists them.
func (w *Worker) DeviceAttributes() []*tfpb.DeviceAttributes {
	return w.getStatus().GetDeviceAttributes()
}
