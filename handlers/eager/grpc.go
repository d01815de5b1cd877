package eager

import (
	"context"
	"errors"
	"io"
	"strings"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// GRPC returns s as a gRPC EagerService; register it with
// tfpb.RegisterEagerServiceServer on the task's gRPC server, beside its
// WorkerService.
func (s *Service) GRPC() tfpb.EagerServiceServer { return grpcService{s: s} }

type grpcService struct {
	tfpb.UnimplementedEagerServiceServer
	s *Service
}

// grpcError turns an error with a wire status into a gRPC status of the
// same code, its message without the code's name, which travels apart.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var st *status.Status
	if errors.As(err, &st) {
		msg = strings.Replace(msg, st.Error(), st.Msg, 1)
	}
	return grpcstatus.Error(codes.Code(status.CodeOf(err)), msg)
}

func result[Resp any](resp Resp, err error) (Resp, error) { return resp, grpcError(err) }

func (g grpcService) CreateContext(ctx context.Context, req *tfpb.CreateContextRequest) (*tfpb.CreateContextResponse, error) {
	return result(g.s.CreateContext(ctx, req))
}

func (g grpcService) UpdateContext(ctx context.Context, req *tfpb.UpdateContextRequest) (*tfpb.UpdateContextResponse, error) {
	return result(g.s.UpdateContext(ctx, req))
}

func (g grpcService) Enqueue(ctx context.Context, req *tfpb.EnqueueRequest) (*tfpb.EnqueueResponse, error) {
	return result(g.s.Enqueue(ctx, req))
}

func (g grpcService) WaitQueueDone(ctx context.Context, req *tfpb.WaitQueueDoneRequest) (*tfpb.WaitQueueDoneResponse, error) {
	return result(g.s.WaitQueueDone(ctx, req))
}

func (g grpcService) RunComponentFunction(ctx context.Context, req *tfpb.RunComponentFunctionRequest) (*tfpb.RunComponentFunctionResponse, error) {
	return result(g.s.RunComponentFunction(ctx, req))
}

func (g grpcService) KeepAlive(ctx context.Context, req *tfpb.KeepAliveRequest) (*tfpb.KeepAliveResponse, error) {
	return result(g.s.KeepAlive(ctx, req))
}

func (g grpcService) CloseContext(ctx context.Context, req *tfpb.CloseContextRequest) (*tfpb.CloseContextResponse, error) {
	return result(g.s.CloseContext(ctx, req))
}

// StreamingEnqueue answers each request of the stream with one response,
// in order, as TensorFlow's server does. A failed request ends the stream
// with its error: TensorFlow's client then fails every request it has
// queued behind it.
func (g grpcService) StreamingEnqueue(stream tfpb.EagerService_StreamingEnqueueServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, err := g.s.Enqueue(stream.Context(), req)
		if err != nil {
			return grpcError(err)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}
