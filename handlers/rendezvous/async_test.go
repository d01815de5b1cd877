package rendezvous_test

import (
	"errors"
	"testing"

	"github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// waiter records what a RecvAsync receiver was told.
type waiter struct {
	told []float32
	err  error
	n    int
}

func (w *waiter) Received(t wire.Tensor, _ int64, err error) {
	w.n++
	w.err = err
	if err == nil {
		w.told = graphtest.Floats(&t)
		t.Buf.Release()
	}
}

func TestRendezvousTryRecv(t *testing.T) {
	r := rendezvous.New()
	if _, _, ok, err := r.TryRecv(1, "k"); ok || err != nil {
		t.Fatalf("TryRecv before the Send = %v, %v", ok, err)
	}
	r.Send(1, "k", graphtest.F32([]int64{1}, 4))
	got, start, ok, err := r.TryRecv(1, "k")
	if !ok || err != nil || start == 0 || !graphtest.ApproxEqual(graphtest.Floats(&got), []float32{4}) {
		t.Fatalf("TryRecv after the Send = %v, %d, %v, %v", graphtest.Floats(&got), start, ok, err)
	}
	got.Buf.Release()
	r.Abort(1, errCleaned)
	if _, _, ok, err := r.TryRecv(1, "j"); ok || !errors.Is(err, errCleaned) {
		t.Fatalf("TryRecv in an aborted step = %v, %v", ok, err)
	}
	r.Cleanup(1, errCleaned)
}

func TestRendezvousRecvAsync(t *testing.T) {
	r := rendezvous.New()
	// Sent first: told at once, no ticket.
	r.Send(1, "sent", graphtest.F32([]int64{1}, 1))
	var early waiter
	if tk := r.RecvAsync(1, "sent", &early); tk != nil || early.n != 1 || early.err != nil || !graphtest.ApproxEqual(early.told, []float32{1}) {
		t.Fatalf("RecvAsync of a sent key: ticket %v, told %d times %v, %v", tk, early.n, early.told, early.err)
	}
	// Waiting: told by the Send, on its goroutine, once.
	var late waiter
	if tk := r.RecvAsync(1, "later", &late); tk == nil || late.n != 0 {
		t.Fatalf("RecvAsync before the Send: ticket %v, told %d times", tk, late.n)
	}
	if _, keys := r.Len(); keys != 1 {
		t.Fatalf("%d keys held while one receiver waits", keys)
	}
	r.Send(1, "later", graphtest.F32([]int64{1}, 2))
	if late.n != 1 || late.err != nil || !graphtest.ApproxEqual(late.told, []float32{2}) {
		t.Fatalf("after the Send: told %d times %v, %v", late.n, late.told, late.err)
	}
	// A second receiver of a key is refused at once.
	var twice waiter
	r.RecvAsync(1, "twice", &waiter{})
	if tk := r.RecvAsync(1, "twice", &twice); tk != nil || twice.n != 1 || status.CodeOf(twice.err) != wire.AlreadyExists {
		t.Fatalf("second RecvAsync of a key: ticket %v, told %d times, %v", tk, twice.n, twice.err)
	}
	r.Cleanup(1, errCleaned)
	if steps, keys := r.Len(); steps != 0 || keys != 0 {
		t.Fatalf("cleanup left %d steps, %d keys", steps, keys)
	}
}

func TestRendezvousRecvAsyncEnds(t *testing.T) {
	r := rendezvous.New()
	// Withdrawn: never told, and the key is free again.
	var gone waiter
	tk := r.RecvAsync(1, "k", &gone)
	if !r.Withdraw(tk) || r.Withdraw(tk) {
		t.Fatal("Withdraw of a waiting receiver: want true once, then false")
	}
	r.Send(1, "k", graphtest.F32([]int64{1}, 3))
	if gone.n != 0 {
		t.Fatalf("a withdrawn receiver was told %d times", gone.n)
	}
	if steps, keys := r.Len(); steps != 1 || keys != 1 {
		t.Fatalf("after Withdraw and Send: %d steps, %d keys, want the sent tensor alone", steps, keys)
	}
	// Told: no longer withdrawn.
	var told waiter
	tk = r.RecvAsync(2, "k", &told)
	r.Send(2, "k", graphtest.F32([]int64{1}, 3))
	if r.Withdraw(tk) || told.n != 1 {
		t.Fatalf("Withdraw after the Send: told %d times", told.n)
	}
	// Aborted and cleaned up: told the step's error, once.
	var aborted, cleaned waiter
	r.RecvAsync(3, "k", &aborted)
	tk = r.RecvAsync(4, "k", &cleaned)
	stepErr := status.Errorf(wire.Cancelled, "step failed")
	r.Abort(3, stepErr)
	r.Cleanup(4, errCleaned)
	if aborted.n != 1 || !errors.Is(aborted.err, stepErr) || cleaned.n != 1 || !errors.Is(cleaned.err, errCleaned) {
		t.Fatalf("aborted: told %d times, %v; cleaned up: told %d times, %v", aborted.n, aborted.err, cleaned.n, cleaned.err)
	}
	if r.Withdraw(tk) {
		t.Fatal("Withdraw of a receiver its step's cleanup told")
	}
	var all waiter
	r.RecvAsync(5, "k", &all)
	r.CleanupAll(errCleaned)
	if all.n != 1 || !errors.Is(all.err, errCleaned) {
		t.Fatalf("CleanupAll: told %d times, %v", all.n, all.err)
	}
	if steps, keys := r.Len(); steps != 0 || keys != 0 {
		t.Fatalf("cleanup left %d steps, %d keys", steps, keys)
	}
}
