package driver

import (
	grpcstatus "google.golang.org/grpc/status"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// fromGRPC turns a gRPC status error into a *status.Status with the same
// code, so callers test errors the same way whatever the protocol.
// gRPC's codes are TensorFlow's.
func fromGRPC(err error) error {
	st, ok := grpcstatus.FromError(err)
	if !ok {
		return err
	}
	return &status.Status{Code: wire.Code(st.Code()), Msg: st.Message()}
}
