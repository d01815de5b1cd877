package graph

import (
	"context"

	"github.com/starwire/starwire/rpc"
)

// stepContext returns the context a step runs under: it has the call's
// deadline (not its values, which no step uses), ends when the call's context does, and can be
// cancelled with a cause by the step itself. stop ends it and returns only
// once nothing watches the call's context any more.
//
// It is not derived from ctx with context.WithCancel on purpose: a call's
// context may be pooled and reused once its handler returns, and a context
// derived from a foreign Context implementation is watched by a goroutine
// of the context package that can outlive the handler. Here the watching
// goroutine is the step's own and stop waits for it.
func stepContext(ctx context.Context) (sctx context.Context, cancel context.CancelCauseFunc, stop func()) {
	base := context.Background()
	cancelDeadline := context.CancelFunc(func() {})
	if d, ok := ctx.Deadline(); ok {
		base, cancelDeadline = context.WithDeadline(base, d)
	}
	sctx, cancel = context.WithCancelCause(base)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			cancel(rpc.Errorf(rpc.CodeOf(ctx.Err()), "call ended: %v", ctx.Err()))
		case <-sctx.Done():
		}
	}()
	return sctx, cancel, func() {
		cancel(nil)
		<-watched
		cancelDeadline()
	}
}
