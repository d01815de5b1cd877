// Package tcp is starwire's stream transport, the one every peer can fall
// back to: an rpc.Transport over TCP, optionally secured with TLS 1.3.
//
// Frames leave in vectored writes that batch many frames and point at the
// senders' tensor memory; a group of reactors (Reactors) flushes
// connections once callers contend, and no caller or reader ever waits on
// a full socket. Received frames land in the buffers the receiver chooses.
//
// The package meets the core through package rpc's exported seam and the
// stream reader's contract with the core, internal/readside: its
// connection implements rpc.Conn, the optional rpc.Withdrawer and
// rpc.ProgressConn, and readside.Reader, and it asks the receiver the core
// hands it for rpc.Throttle, rpc.PlaintextWatcher, readside.Lender and
// readside.Waker. rpc never imports this package; a program picks the
// transport (rpc.ClientOptions.Transport, rpc.Server.Serve's listener).
package tcp

import (
	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/rpc"
)

// What a connection offers the core, checked at compile time.
var (
	_ rpc.Transport    = (*Transport)(nil)
	_ rpc.Withdrawer   = (*conn)(nil)
	_ rpc.ProgressConn = (*conn)(nil)
	_ readside.Reader  = (*conn)(nil)
)
