package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
)

// readSideOf returns who reads the client's connection now.
func readSideOf(t *testing.T, c *Client) readSide {
	t.Helper()
	c.mu.Lock()
	cc := c.cc
	c.mu.Unlock()
	if cc == nil {
		t.Fatal("client has no connection")
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.reading
}

// wholeLimitOf is the longest answer a caller of c reads whole from its
// connection's read side.
func wholeLimitOf(t *testing.T, c *Client) uint64 {
	t.Helper()
	c.mu.Lock()
	cc := c.cc
	c.mu.Unlock()
	if cc == nil || cc.sr == nil {
		t.Fatal("client has no connection that lends its read side")
	}
	return cc.sr.WholeLimit()
}

func echoOnce(ctx context.Context, c *Client, payload []byte) error {
	var reply Reply
	defer reply.Release()
	if err := c.Call(ctx, mEcho, &Request{Meta: payload}, &reply); err != nil {
		return err
	}
	if !bytes.Equal(reply.Meta, payload) {
		return fmt.Errorf("echo of %q answered %q", payload, reply.Meta)
	}
	return nil
}

// A caller reads its own answer once the receiving goroutine has lent it
// the read side, and leaves it to the next caller, whether or not its
// context can end.
func TestCallerReadsItsOwnAnswer(t *testing.T) {
	env := newTestEnv(t)
	bg := context.Background()
	for i := range 3 {
		if err := echoOnce(bg, env.client, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := readSideOf(t, env.client); got != nobodyReads {
		t.Fatalf("after sequential calls the read side is %d, want it left to the next caller (%d)", got, nobodyReads)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if err := echoOnce(ctx, env.client, []byte("deadline")); err != nil {
		t.Fatal(err)
	}
	if got := readSideOf(t, env.client); got != nobodyReads {
		t.Fatalf("after a call with a deadline the read side is %d, want it left to the next caller (%d)", got, nobodyReads)
	}
	if err := echoOnce(bg, env.client, []byte("again")); err != nil {
		t.Fatal(err)
	}
}

// Callers that read their own answers, callers with deadlines and callers
// that give up, all at once on one connection: every answer reaches its
// caller and nobody waits for an answer that nobody reads.
func TestReadSideSharedByMixedCallers(t *testing.T) {
	env := newTestEnv(t)
	const callers, calls = 8, 200
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < calls && time.Now().Before(deadline); j++ {
				payload := fmt.Appendf(nil, "caller %d call %d", i, j)
				var err error
				switch i % 4 {
				case 0, 1: // reads its own answer when it can
					err = echoOnce(context.Background(), env.client, payload)
				case 2:
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					err = echoOnce(ctx, env.client, payload)
					cancel()
				case 3: // gives up on a slow handler now and then
					var meta [8]byte
					binary.LittleEndian.PutUint64(meta[:], uint64(time.Duration(j%3)*time.Millisecond))
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					var reply Reply
					err = env.client.Call(ctx, mSleep, &Request{Meta: meta[:]}, &reply)
					reply.Release()
					cancel()
					if c := CodeOf(err); c == wire.DeadlineExceeded {
						err = nil
					}
				}
				if err != nil {
					errs <- fmt.Errorf("caller %d call %d: %w", i, j, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A connection the peer closes while nobody reads it is noticed by the
// next caller before it sends, so that the call goes on a new connection
// instead of failing.
func TestIdleConnectionClosedByPeerRedials(t *testing.T) {
	env := newTestEnv(t)
	bg := context.Background()
	for i := range 3 {
		if err := echoOnce(bg, env.client, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := readSideOf(t, env.client); got != nobodyReads {
		t.Fatalf("the read side is %d, want it left to the next caller", got)
	}
	env.srv.Close()
	srv := NewServer()
	srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, HandlerOptions{Inline: true})
	var l Listener
	var err error
	for range 50 {
		if l, err = tcpTransport().Listen(env.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // paces retries of a bind the closed listener's port may still refuse
	}
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	// The check is made once the read side has been left for idleCheck:
	// the sleep lets that time pass, it orders nothing.
	time.Sleep(2 * idleCheck)
	if err := echoOnce(bg, env.client, []byte("after restart")); err != nil {
		t.Fatalf("first call after the peer closed the idle connection: %v", err)
	}
	if st := env.client.Stats(); st.Reconnects != 1 {
		t.Fatalf("stats = %+v, want one reconnect", st)
	}
}

// A peer that closes a connection whose read side was left to the next
// caller is noticed without any call, as when the read side is never lent.
func TestIdlePeerCloseNoticed(t *testing.T) {
	env := newTestEnv(t)
	for i := range 3 {
		if err := echoOnce(context.Background(), env.client, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := readSideOf(t, env.client); got != nobodyReads {
		t.Fatalf("the read side is %d, want it left to the next caller", got)
	}
	env.srv.Close()
	testwait.Eventually(t, 10*time.Second, func() bool { return !env.client.Stats().Connected },
		"the client to let go of the connection the peer closed")
}
