package driver

import (
	"google.golang.org/grpc/status"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// fromGRPC turns a gRPC status error into an *rpc.Status with the same
// code, so callers test errors the same way whatever the protocol.
// gRPC's codes are TensorFlow's.
func fromGRPC(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	return &rpc.Status{Code: wire.Code(st.Code()), Msg: st.Message()}
}
