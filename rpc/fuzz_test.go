package rpc

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/starwire/starwire/wire"
)

// FuzzServerStream sends arbitrary bytes to a live server on a connection of
// their own; whatever they hold, the server must keep serving everyone else.
func FuzzServerStream(f *testing.F) {
	for _, m := range []*wire.Message{
		{Header: wire.Header{Kind: wire.KindRequest, Method: mEcho.ID, CallID: 1}, Meta: []byte("hi")},
		{Header: wire.Header{Kind: wire.KindRequest, Method: mTensor.ID, CallID: 2},
			Tensors: []wire.Tensor{{DType: wire.DTInt32, Shape: []int64{2}, Data: make([]byte, 8)}}},
		{Header: wire.Header{Kind: wire.KindCancel, CallID: 3}},
		{Header: wire.Header{Kind: wire.KindPing, CallID: 4}},
		{Header: wire.Header{Kind: wire.KindRequest, Method: 12345, CallID: 5}},
		{Header: wire.Header{Kind: wire.KindRequest, Method: mDeferEcho.ID, CallID: 6}, Meta: []byte("later")},
	} {
		head, err := wire.AppendHead(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		for _, t := range m.Tensors {
			head = append(head, t.Data...)
		}
		f.Add(head)
	}
	env := newTestEnv(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		nc, err := net.Dial("tcp", env.addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(b)
		nc.SetReadDeadline(time.Now().Add(2 * time.Millisecond))
		var sink [4096]byte
		nc.Read(sink[:])
		nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var reply Reply
		for _, m := range []Method{mEcho, mDeferEcho} {
			if err := env.client.Call(ctx, m, &Request{Meta: []byte("alive")}, &reply); err != nil || string(reply.Meta) != "alive" {
				t.Fatalf("server stopped serving %s after %q: %q, %v", m.Name, b, reply.Meta, err)
			}
			reply.Release()
		}
	})
}
