// Package record keeps the requests a task receives over gRPC as files:
// what a TensorFlow master sent (its graph partitions, its RunGraph
// requests) becomes test data that replays without TensorFlow.
package record

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// MaxFiles bounds the requests one interceptor writes: a long job would
// otherwise fill the disk with RunGraph requests.
const MaxFiles = 10000

// Interceptor returns a gRPC unary interceptor that writes each request
// it sees to dir as NNNNN-Method.pb (the request's binary protobuf, in the
// order the calls arrived), then calls the handler. Only the first MaxFiles
// requests are written. A request that cannot be written fails its call
// with the reason rather than being silently left out.
func Interceptor(dir string) (grpc.UnaryServerInterceptor, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	var seq atomic.Int64
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if m, ok := req.(proto.Message); ok {
			if n := seq.Add(1); n <= MaxFiles {
				if err := write(dir, n, path.Base(info.FullMethod), m); err != nil {
					return nil, err
				}
			}
		}
		return h(ctx, req)
	}, nil
}

func write(dir string, n int64, method string, m proto.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("record %s: %w", method, err)
	}
	name := filepath.Join(dir, fmt.Sprintf("%05d-%s.pb", n, method))
	if err := os.WriteFile(name, b, 0o644); err != nil {
		return fmt.Errorf("record %s: %w", method, err)
	}
	return nil
}
