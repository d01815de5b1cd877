package rpc

import (
	"context"
	"errors"
	"testing"
)

func TestClientsShareOneConnectionPerPeer(t *testing.T) {
	env := newTestEnv(t)
	cs := &Clients{Options: ClientOptions{Transport: tcpTransport()}, Names: map[string]string{env.addr: "/job:ps/replica:0/task:0"}}
	defer cs.Close()
	a, b := cs.Get(env.addr), cs.Get(env.addr)
	if a != b {
		t.Fatal("two clients for one address")
	}
	var reply Reply
	if err := a.Call(context.Background(), mEcho, &Request{Meta: []byte("x")}, &reply); err != nil {
		t.Fatal(err)
	}
	reply.Release()
	err := a.Call(context.Background(), NewMethod("Missing"), &Request{}, &reply)
	var st *Status
	if !errors.As(err, &st) || st.Code != ErrUnimplemented.Code {
		t.Fatalf("err = %v", err)
	}
	if want := "rpc: call Missing to /job:ps/replica:0/task:0: unimplemented"; err.Error()[:len(want)] != want {
		t.Fatalf("err = %q", err)
	}
}
