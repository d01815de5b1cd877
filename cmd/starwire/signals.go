package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// A stopError is the cause of a command's context when a signal, or a
// closed standard output, stopped the command.
type stopError struct {
	sig    syscall.Signal // 0 when standard output was closed
	status int            // the exit status: 128 plus the signal's number
}

func (e *stopError) Error() string {
	if e.sig == 0 {
		return "standard output closed"
	}
	return "stopped by " + unix.SignalName(e.sig)
}

// errStdoutClosed stops a command whose standard output went away (train |
// head -1): it ends as SIGPIPE would have ended it, but after its deferred
// cleanup has run.
var errStdoutClosed = &stopError{status: 128 + int(syscall.SIGPIPE)}

// A stopper cancels a command's context on SIGINT, SIGTERM and SIGHUP, and
// keeps SIGPIPE from killing the process before its cleanup: with SIGPIPE
// delivered to a channel, a write to a closed standard output fails with
// EPIPE instead, which stdoutWriter turns into errStdoutClosed. A second
// stopping signal exits at once, with its status: the cleanup the first
// one started (train's last checkpoint) is not waited for.
type stopper struct {
	cancel context.CancelCauseFunc
	sigs   chan os.Signal
	done   chan struct{}
	once   sync.Once
	exit   func(status int)
}

func stopOnSignals(parent context.Context) (context.Context, *stopper) {
	ctx, s := newStopper(parent, os.Exit)
	signal.Notify(s.sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	go s.watch()
	return ctx, s
}

func newStopper(parent context.Context, exit func(int)) (context.Context, *stopper) {
	ctx, cancel := context.WithCancelCause(parent)
	return ctx, &stopper{cancel: cancel, sigs: make(chan os.Signal, 4), done: make(chan struct{}), exit: exit}
}

// watch turns the signals into the context's cancellation, and the second
// into an exit.
func (s *stopper) watch() {
	stopped := false
	for {
		select {
		case sig := <-s.sigs:
			n := sig.(syscall.Signal)
			switch {
			case n == syscall.SIGPIPE:
				// A socket's peer or standard output went away; the
				// failed write says which.
			case stopped:
				s.exit(128 + int(n))
				return
			default:
				stopped = true
				s.cancel(&stopError{sig: n, status: 128 + int(n)})
			}
		case <-s.done:
			return
		}
	}
}

// release stops watching signals; the context is cancelled.
func (s *stopper) release() {
	s.once.Do(func() {
		signal.Stop(s.sigs)
		close(s.done)
		s.cancel(nil)
	})
}

// stdoutWriter writes a command's output and stops the command when the
// output has gone away.
type stdoutWriter struct {
	w      io.Writer
	closed func()
}

func (o *stdoutWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		o.closed()
	}
	return n, err
}
