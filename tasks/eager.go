package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/eager"
	"github.com/starwire/starwire/wire/tfpb"
)

// eagerCollectInterval is how often contexts whose keep-alive lapsed are
// looked for.
const eagerCollectInterval = time.Second

// serveEager puts the eager service of w on the task's gRPC server, for
// TensorFlow 2 clients (a ParameterServerStrategy's coordinator and
// workers), and collects its lapsed contexts until the task closes.
func (s *Server) serveEager(w *handlers.Worker, logger *slog.Logger) error {
	es, err := eager.New(eager.Options{Env: w.Env(), Devices: w.DeviceAttributes(), Cluster: s.followCluster, Logger: logger})
	if err != nil {
		return fmt.Errorf("%s: %w", s.Task(), err)
	}
	tfpb.RegisterEagerServiceServer(s.grpcSrv, es.GRPC())
	ctx, cancel := context.WithCancel(context.Background())
	go es.CollectEvery(ctx, eagerCollectInterval)
	s.OnClose(func() { cancel(); es.Close() })
	return nil
}
