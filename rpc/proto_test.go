package rpc

import (
	"context"
	"testing"

	"github.com/starwire/starwire/wire/tfpb"
)

// CallProto's buffer, request and reply are pooled: what allocates is the
// server's request and response messages, which HandleProto makes per call.
func TestCallProtoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are asserted in the run without -race")
	}
	env := newTestEnv(t)
	m := NewMethod("Control")
	env.srv.Register(m, HandleProto(func(ctx context.Context, req *tfpb.RecvTensorRequest) (*tfpb.RecvTensorResponse, error) {
		return &tfpb.RecvTensorResponse{SendStartMicros: req.StepId}, nil
	}), HandlerOptions{Inline: true})
	req := &tfpb.RecvTensorRequest{StepId: 3, RendezvousKey: "k"}
	var resp tfpb.RecvTensorResponse
	call := func() {
		if err := env.client.CallProto(context.Background(), m, req, &resp); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		call()
	}
	if n := testing.AllocsPerRun(300, call); n > 2 {
		t.Fatalf("CallProto allocates %v times per call (both ends), want at most 2", n)
	}
}
