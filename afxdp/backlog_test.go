package afxdp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/wire"
)

// TestBacklogFullResets: a session completed while the accept backlog is
// full is reset and counted nowhere, and a session Accept returns is
// already counted in Stats.
func TestBacklogFullResets(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	srv := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket, Backlog: 1})
	cli := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket, Backlog: -1})
	defer srv.Close()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	send := func(c *afxdp.Conn) error {
		done := make(chan error, 1)
		if err := c.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1}, Meta: []byte("x"), Done: doneFunc(func(err error) { done <- err })}); err != nil {
			return err
		}
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	first, err := cli.Dial(ctx, memA.String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := send(first); err != nil {
		t.Fatalf("first session: %v", err)
	}
	// The dial completes the session (and is reset) or the first packet
	// after it does.
	second, err := cli.Dial(ctx, memA.String())
	if err == nil {
		err = send(second)
		second.Close()
	}
	if !errors.Is(err, afxdp.ErrReset) {
		t.Fatalf("second session, past the backlog: %v, want ErrReset", err)
	}
	c, err := srv.AcceptContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st := srv.Stats(); st.Sessions != 1 || st.HalfOpen != 0 || st.Resets == 0 {
		t.Fatalf("after accepting the first session: %+v, want 1 session, none half-open, a reset", st)
	}
}
