package eager

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// wantCode fails the test unless err has code, and its message contains
// every one of words.
func wantCode(t *testing.T, what string, err error, code wire.Code, words ...string) {
	t.Helper()
	if got := status.CodeOf(err); err == nil || got != code {
		t.Fatalf("%s: %v (code %v), want %v", what, err, got, code)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s: %q does not say %q", what, err, w)
		}
	}
}

func create(t *testing.T, s *Service, id, view uint64, keepAliveSecs int64) {
	t.Helper()
	resp, err := s.CreateContext(context.Background(), &tfpb.CreateContextRequest{ContextId: id, ContextViewId: view, KeepAliveSecs: keepAliveSecs})
	if err != nil {
		t.Fatalf("CreateContext %d: %v", id, err)
	}
	if len(resp.GetDeviceAttributes()) != 1 || resp.GetDeviceAttributes()[0].GetName() != testTask+"/device:CPU:0" {
		t.Fatalf("CreateContext answered devices %v", resp.GetDeviceAttributes())
	}
}

// TestUnknownContextIsAborted checks TensorFlow's answer to a context the
// task does not hold (a restarted ps): Aborted, in its words, from every
// method but CloseContext, which ignores it.
func TestUnknownContextIsAborted(t *testing.T) {
	s := newTestService(t, Options{})
	ctx := context.Background()
	msg := "Unable to find a context_id matching the specified one (42). Perhaps the worker was restarted, or the context was GC'd?"
	_, err := s.Enqueue(ctx, &tfpb.EnqueueRequest{ContextId: 42})
	wantCode(t, "Enqueue", err, wire.Aborted, msg)
	_, err = s.KeepAlive(ctx, &tfpb.KeepAliveRequest{ContextId: 42})
	wantCode(t, "KeepAlive", err, wire.Aborted, msg)
	_, err = s.UpdateContext(ctx, &tfpb.UpdateContextRequest{ContextId: 42, ContextViewId: 1})
	wantCode(t, "UpdateContext", err, wire.Aborted, msg)
	_, err = s.WaitQueueDone(ctx, &tfpb.WaitQueueDoneRequest{ContextId: 42})
	wantCode(t, "WaitQueueDone", err, wire.Aborted, msg)
	_, err = s.RunComponentFunction(ctx, &tfpb.RunComponentFunctionRequest{ContextId: 42})
	wantCode(t, "RunComponentFunction", err, wire.Aborted, msg)
	if _, err := s.CloseContext(ctx, &tfpb.CloseContextRequest{ContextId: 42}); err != nil {
		t.Fatalf("CloseContext of an unknown context: %v", err)
	}
}

// TestContextViews follows TensorFlow's view ids: UpdateContext only to the
// next view, KeepAlive answering it, CreateContext replacing a context of
// an older view and refusing one of a newer, CloseContext ignoring a stale
// view.
func TestContextViews(t *testing.T) {
	s := newTestService(t, Options{})
	ctx := context.Background()
	create(t, s, 1, 0, 0)
	if _, err := s.UpdateContext(ctx, &tfpb.UpdateContextRequest{ContextId: 1, ContextViewId: 2}); err == nil {
		t.Fatal("UpdateContext skipped a view")
	} else {
		wantCode(t, "UpdateContext to view 2", err, wire.InvalidArgument, "currently at view #0 but received update request at view #2")
	}
	// No devices: the update does not concern this task, the view moves.
	if _, err := s.UpdateContext(ctx, &tfpb.UpdateContextRequest{ContextId: 1, ContextViewId: 1}); err != nil {
		t.Fatal(err)
	}
	upd, err := s.UpdateContext(ctx, &tfpb.UpdateContextRequest{ContextId: 1, ContextViewId: 2,
		ClusterDeviceAttributes: []*tfpb.DeviceAttributes{{Name: testTask + "/device:CPU:0"}}})
	if err != nil || len(upd.GetDeviceAttributes()) != 1 {
		t.Fatalf("UpdateContext with devices: %v, %v", upd, err)
	}
	ka, err := s.KeepAlive(ctx, &tfpb.KeepAliveRequest{ContextId: 1})
	if err != nil || ka.GetContextViewId() != 2 {
		t.Fatalf("KeepAlive: %v, %v; want view 2", ka, err)
	}
	_, err = s.CreateContext(ctx, &tfpb.CreateContextRequest{ContextId: 1, ContextViewId: 1})
	wantCode(t, "CreateContext of an older view", err, wire.InvalidArgument, "Context id: <1> already exists")
	if _, err := s.CloseContext(ctx, &tfpb.CloseContextRequest{ContextId: 1, ContextViewId: 1}); err != nil {
		t.Fatal(err)
	}
	if s.Contexts() != 1 {
		t.Fatal("CloseContext of a stale view closed the context")
	}
	create(t, s, 1, 3, 0) // a client that reconnected after updates
	ka, err = s.KeepAlive(ctx, &tfpb.KeepAliveRequest{ContextId: 1})
	if err != nil || ka.GetContextViewId() != 3 {
		t.Fatalf("KeepAlive after re-creation: %v, %v; want view 3", ka, err)
	}
	if _, err := s.CloseContext(ctx, &tfpb.CloseContextRequest{ContextId: 1, ContextViewId: 3}); err != nil {
		t.Fatal(err)
	}
	if s.Contexts() != 0 {
		t.Fatal("CloseContext left the context")
	}
}

// TestClearExistingContexts drops every other context and what it made.
func TestClearExistingContexts(t *testing.T) {
	s := newTestService(t, Options{})
	create(t, s, 1, 0, 0)
	create(t, s, 2, 0, 0)
	makeVariable(t, s, 1, 1, []float32{1, 2})
	if _, err := s.CreateContext(context.Background(), &tfpb.CreateContextRequest{ContextId: 3, ClearExistingContexts: true}); err != nil {
		t.Fatal(err)
	}
	if n := s.Contexts(); n != 1 {
		t.Fatalf("%d contexts, want only the new one", n)
	}
	if n := s.opts.Env.Vars.Len(); n != 0 {
		t.Fatalf("%d variables outlived their contexts", n)
	}
}

// TestKeepAliveLapses collects a context not heard from for longer than
// its keep_alive_secs, and only then; a context without one stays.
func TestKeepAliveLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestService(t, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go s.CollectEvery(ctx, time.Second)
		create(t, s, 1, 0, 10)
		create(t, s, 2, 0, 0)
		makeVariable(t, s, 1, 1, []float32{1})
		for range 3 { // heard from every 8 s: never lapses
			time.Sleep(8 * time.Second)
			if _, err := s.KeepAlive(context.Background(), &tfpb.KeepAliveRequest{ContextId: 1}); err != nil {
				t.Fatalf("KeepAlive within the keep-alive: %v", err)
			}
		}
		time.Sleep(12 * time.Second)
		synctest.Wait()
		_, err := s.KeepAlive(context.Background(), &tfpb.KeepAliveRequest{ContextId: 1})
		wantCode(t, "KeepAlive after 12 s of silence", err, wire.Aborted, "context was GC'd")
		if s.Contexts() != 1 {
			t.Fatalf("%d contexts, want the one without keep-alive", s.Contexts())
		}
		if n := s.opts.Env.Vars.Len(); n != 0 {
			t.Fatalf("%d variables outlived their collected context", n)
		}
		cancel()
		synctest.Wait()
	})
}

// TestWaitQueueDone answers at once (operations run within Enqueue) and
// refuses particular op ids as TensorFlow does.
func TestWaitQueueDone(t *testing.T) {
	s := newTestService(t, Options{})
	create(t, s, 1, 0, 0)
	if _, err := s.WaitQueueDone(context.Background(), &tfpb.WaitQueueDoneRequest{ContextId: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := s.WaitQueueDone(context.Background(), &tfpb.WaitQueueDoneRequest{ContextId: 1, OpId: []int64{3}})
	wantCode(t, "WaitQueueDone of op 3", err, wire.Unimplemented, "particular op IDs")
}
