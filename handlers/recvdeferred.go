package handlers

import (
	"context"
	"sync"

	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// A deferredRecv is a RecvTensor call whose tensor has not been sent yet:
// the rendezvous tells it when the tensor arrives or the step ends, and
// the call's context when the caller gives up, whichever comes first; the
// other finds the wait settled and does nothing.
type deferredRecv struct {
	rv     *rendezvous.Rendezvous
	ctx    context.Context
	resp   *rpc.Response
	answer func(error)
	step   int64
	key    string // a view of the request, valid until answer

	// stop ends the watch on the call's context: once the call is
	// answered, its context belongs to another call.
	stop func() bool

	mu     sync.Mutex
	ticket *rendezvous.Ticket // nil until RecvAsync returns, or when it answered at once
	ended  bool               // the call's context ended
}

// deferRecvTensor waits for key's tensor of step without a goroutine:
// answer is called once with resp filled, or with the error that ended the
// wait.
func deferRecvTensor(ctx context.Context, rv *rendezvous.Rendezvous, step int64, key string, resp *rpc.Response, answer func(error)) {
	d := &deferredRecv{rv: rv, ctx: ctx, resp: resp, answer: answer, step: step, key: key}
	// The watch starts before the wait, so that no answer (which hands
	// the context on) can come before it.
	d.stop = context.AfterFunc(ctx, d.gaveUp)
	tk := rv.RecvAsync(step, key, d)
	d.mu.Lock()
	d.ticket = tk
	ended := d.ended
	d.mu.Unlock()
	if ended && tk != nil {
		d.withdraw(tk)
	}
}

// Received implements rendezvous.Waiter: it runs on the goroutine that sent
// the tensor (or ended the step), or in RecvAsync itself.
func (d *deferredRecv) Received(t wire.Tensor, sendStart int64, err error) {
	d.stop()
	if err != nil {
		d.answer(err)
		return
	}
	answerRecvTensor(d.resp, t, sendStart)
	d.answer(nil)
}

// gaveUp runs, on a goroutine of its own, once the call's context ends.
func (d *deferredRecv) gaveUp() {
	d.mu.Lock()
	d.ended = true
	tk := d.ticket
	d.mu.Unlock()
	if tk != nil {
		d.withdraw(tk)
	}
}

// withdraw answers with the context's error unless the tensor (or the
// step's end) won the race for tk.
func (d *deferredRecv) withdraw(tk *rendezvous.Ticket) {
	if !d.rv.Withdraw(tk) {
		return
	}
	err := d.ctx.Err()
	d.answer(status.Errorf(status.CodeOf(err), "rendezvous: step %d: waiting for %q: %v", d.step, d.key, err))
}
