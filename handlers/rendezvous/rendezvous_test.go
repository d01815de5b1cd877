package rendezvous_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/internal/bufpool"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// errCleaned is what the tests clean steps up with.
var errCleaned = status.Errorf(wire.Aborted, "step cleaned up")

func TestRendezvousSendThenRecv(t *testing.T) {
	r := rendezvous.New()
	x := graphtest.F32([]int64{2}, 1, 2)
	if err := r.Send(1, "k", x); err != nil {
		t.Fatal(err)
	}
	got, start, err := r.Recv(context.Background(), 1, "k")
	if err != nil || start == 0 || !graphtest.ApproxEqual(graphtest.Floats(&got), []float32{1, 2}) {
		t.Fatalf("Recv = %v, %d, %v", graphtest.Floats(&got), start, err)
	}
	got.Buf.Release()
	// Keys are per step.
	y := graphtest.F32([]int64{1}, 3)
	r.Send(2, "k", y)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := r.Recv(ctx, 1, "k"); !errors.Is(err, status.ErrDeadlineExceeded) {
		t.Fatalf("Recv of a key sent in another step: %v", err)
	}
	r.Cleanup(1, errCleaned)
	r.Cleanup(2, errCleaned)
}

func TestRendezvousRecvWaits(t *testing.T) {
	r := rendezvous.New()
	done := make(chan []float32)
	go func() {
		got, _, err := r.Recv(context.Background(), 1, "k")
		if err != nil {
			t.Error(err)
		}
		done <- graphtest.Floats(&got)
		got.Buf.Release()
	}()
	// Send only once the receiver waits, so that the test covers the wake-up.
	testwait.Eventually(t, graphtest.Settle, func() bool { _, keys := r.Len(); return keys == 1 }, "the receiver to wait")
	if err := r.Send(1, "k", graphtest.F32([]int64{1}, 5)); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if !graphtest.ApproxEqual(got, []float32{5}) {
			t.Fatalf("got %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("receiver not woken")
	}
	r.Cleanup(1, errCleaned)
}

func TestRendezvousDuplicates(t *testing.T) {
	r := rendezvous.New()
	defer r.Cleanup(1, errCleaned)
	r.Send(1, "k", graphtest.F32([]int64{1}, 1))
	if err := r.Send(1, "k", graphtest.F32([]int64{1}, 2)); !errors.Is(err, status.ErrAlreadyExists) {
		t.Fatalf("second Send: %v", err)
	}
}

func TestRendezvousDeadline(t *testing.T) {
	r := rendezvous.New()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, _, err := r.Recv(ctx, 1, "k"); !errors.Is(err, status.ErrDeadlineExceeded) {
		t.Fatalf("Recv past its deadline: %v", err)
	}
	// The timed-out receiver leaves nothing behind.
	if steps, keys := r.Len(); steps != 0 || keys != 0 {
		t.Fatalf("after a timed-out Recv: %d steps, %d keys", steps, keys)
	}
}

func TestRendezvousAbortFailsWaiters(t *testing.T) {
	r := rendezvous.New()
	stepErr := status.Errorf(wire.Internal, "node \"x\" failed")
	errs := make(chan error, 3)
	for _, k := range []string{"a", "b", "c"} {
		go func() {
			_, _, err := r.Recv(context.Background(), 9, k)
			errs <- err
		}()
	}
	testwait.Eventually(t, graphtest.Settle, func() bool { _, keys := r.Len(); return keys == 3 }, "3 keys in the rendezvous")
	r.Abort(9, stepErr)
	for range 3 {
		select {
		case err := <-errs:
			if err != stepErr {
				t.Fatalf("waiter got %v, want the step's error", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiter not failed by Abort")
		}
	}
	// Later sends and receives of the step fail too, until Cleanup.
	if err := r.Send(9, "d", graphtest.F32([]int64{1})); err != stepErr {
		t.Fatalf("Send after Abort: %v", err)
	}
	if _, _, err := r.Recv(context.Background(), 9, "d"); err != stepErr {
		t.Fatalf("Recv after Abort: %v", err)
	}
	r.Cleanup(9, errCleaned)
	if steps, keys := r.Len(); steps != 0 || keys != 0 {
		t.Fatalf("after Cleanup: %d steps, %d keys", steps, keys)
	}
}

// TestRendezvousCleanupFreesEverything checks that cleaning a step up
// fails its waiters, releases the tensors nobody received, and leaves no
// state, even when a late Send or Recv for the step arrives afterwards.
func TestRendezvousCleanupFreesEverything(t *testing.T) {
	live := bufpool.Live()
	r := rendezvous.New()
	for k := range 10 {
		r.Send(3, string(rune('a'+k)), graphtest.F32([]int64{256}))
	}
	waiter := make(chan error, 1)
	go func() {
		_, _, err := r.Recv(context.Background(), 3, "never-sent")
		waiter <- err
	}()
	testwait.Eventually(t, graphtest.Settle, func() bool { _, keys := r.Len(); return keys == 11 }, "11 keys in the rendezvous")
	r.Cleanup(3, errCleaned)
	select {
	case err := <-waiter:
		if !errors.Is(err, status.ErrAborted) {
			t.Fatalf("waiter after cleanup: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not failed by Cleanup")
	}
	if err := r.Send(3, "late", graphtest.F32([]int64{4})); !errors.Is(err, status.ErrAborted) {
		t.Fatalf("late Send: %v", err)
	}
	if _, _, err := r.Recv(context.Background(), 3, "late"); !errors.Is(err, status.ErrAborted) {
		t.Fatalf("late Recv: %v", err)
	}
	if steps, keys := r.Len(); steps != 0 || keys != 0 {
		t.Fatalf("after Cleanup: %d steps, %d keys", steps, keys)
	}
	// A new run of the step id (a RunGraph) opens it again.
	r.Open(3)
	if err := r.Send(3, "again", graphtest.F32([]int64{4})); err != nil {
		t.Fatalf("Send after Open: %v", err)
	}
	r.Cleanup(3, errCleaned)
	// Buffers of earlier tests' connections may still be on their way back,
	// so the count may drop below the baseline, but must not stay above.
	testwait.Eventually(t, graphtest.Settle, func() bool { return bufpool.Live() <= live }, "pooled buffers to come back")
}

func TestRendezvousCleanupAll(t *testing.T) {
	r := rendezvous.New()
	for s := range int64(40) {
		r.Send(s, "k", graphtest.F32([]int64{1}))
	}
	r.CleanupAll(errCleaned)
	if steps, keys := r.Len(); steps != 0 || keys != 0 {
		t.Fatalf("after CleanupAll: %d steps, %d keys", steps, keys)
	}
}
