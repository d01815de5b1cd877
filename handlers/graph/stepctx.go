package graph

import (
	"context"

	"github.com/starwire/starwire/wire/status"
)

// stepContext returns the context a step runs under: it has the call's
// deadline (not its values, which no step uses), ends when the call's
// context does, and can be cancelled with a cause by the step itself. stop
// ends it; once stop has returned, the call's context is no longer watched,
// so it may go back to its pool.
//
// It is not derived from ctx with context.WithCancel on purpose: a call's
// context may be pooled and reused once its handler returns, and a context
// derived from a foreign Context implementation is watched by a goroutine
// of the context package that can outlive the handler. The call's end is
// instead watched with context.AfterFunc, which a starwire call's context
// and the standard ones serve without a goroutine of their own, so that a
// step neither starts one nor waits for one to end before it answers.
func stepContext(ctx context.Context) (sctx context.Context, cancel context.CancelCauseFunc, stop func()) {
	base := context.Background()
	cancelDeadline := context.CancelFunc(func() {})
	if d, ok := ctx.Deadline(); ok {
		base, cancelDeadline = context.WithDeadline(base, d)
	}
	sctx, cancel = context.WithCancelCause(base)
	if ctx.Done() == nil {
		return sctx, cancel, func() { cancel(nil); cancelDeadline() }
	}
	unwatch := context.AfterFunc(ctx, func() {
		// It may run after stop when the call ended as stop was called;
		// the step is over then and cancelling it changes nothing.
		cancel(status.Errorf(status.CodeOf(ctx.Err()), "call ended: %v", ctx.Err()))
	})
	return sctx, cancel, func() {
		unwatch()
		cancel(nil)
		cancelDeadline()
	}
}
