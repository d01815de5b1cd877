package main

import (
	"context"
	"errors"
	"syscall"
	"testing"
)

// TestSecondSignalExits: the first stopping signal cancels the command's
// context, with its exit status; a SIGPIPE does nothing; the second
// stopping signal exits at once with its own.
func TestSecondSignalExits(t *testing.T) {
	exited := make(chan int, 1)
	ctx, s := newStopper(context.Background(), func(status int) { exited <- status })
	go s.watch()
	defer s.release()
	s.sigs <- syscall.SIGINT
	<-ctx.Done()
	var stopped *stopError
	if !errors.As(context.Cause(ctx), &stopped) || stopped.sig != syscall.SIGINT || stopped.status != 130 {
		t.Fatalf("cause %v, want SIGINT with status 130", context.Cause(ctx))
	}
	s.sigs <- syscall.SIGPIPE
	s.sigs <- syscall.SIGTERM
	if status := <-exited; status != 128+int(syscall.SIGTERM) {
		t.Errorf("second signal exited %d, want %d", status, 128+int(syscall.SIGTERM))
	}
}
