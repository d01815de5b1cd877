package rpc

import (
	"context"
	"net"
	"sync"

	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/wire"
)

// Interceptors wrap every call of a Client or every handler of a Server, as
// gRPC's unary interceptors do: auth, logging, tracing, metrics. Several are
// chained in order, the first outermost: it runs first and sees the result
// last. Each must call its continuation (invoke, next) at most once, or
// answer without it.
//
// A chain is built once, by NewClient and by Server.Register, never per
// call; a Client or Server without interceptors runs exactly as before.
// The info a chain is handed is pooled with its call: an interceptor must
// not keep it after returning.

// ClientInfo describes a call to client interceptors.
type ClientInfo struct {
	Method Method
	// Peer is the client's name for the peer (ClientOptions.Name).
	Peer string
	// Path is the path the call took (netpath.TCP, AFXDP, UDP), as the
	// transport that carried its request reports it (PathSender), else
	// the connection's: set by the invoker as it sends the request, so an
	// interceptor reads it after invoke returns; empty when the call
	// failed before.
	Path netpath.Path
}

// An Invoker performs a call; the last one of a chain sends it.
type Invoker func(ctx context.Context, info *ClientInfo, req *Request, reply *Reply) error

// A ClientInterceptor wraps a Client's calls. It may change ctx, req or the
// reply's Alloc before calling invoke, and inspect reply after.
type ClientInterceptor func(ctx context.Context, info *ClientInfo, req *Request, reply *Reply, invoke Invoker) error

// ServerInfo describes a call to server interceptors.
type ServerInfo struct {
	Method Method
	// Peer is the caller's address.
	Peer net.Addr
	// Path is the path the call came over (netpath.TCP, AFXDP, UDP, or
	// the network of a connection that does not say).
	Path netpath.Path
	// Inline says the handler runs on the connection's goroutine, where an
	// interceptor must not block either.
	Inline bool
}

// A ServerHandler is a Handler as a chain of server interceptors sees it.
type ServerHandler func(ctx context.Context, info *ServerInfo, req *wire.Inbound, resp *Response) error

// A ServerInterceptor wraps a Server's handlers. A non-nil error it returns
// is sent instead of resp, as a handler's is.
type ServerInterceptor func(ctx context.Context, info *ServerInfo, req *wire.Inbound, resp *Response, next ServerHandler) error

// chainClient returns an Invoker that runs ics around last.
func chainClient(ics []ClientInterceptor, last Invoker) Invoker {
	for i := len(ics) - 1; i >= 0; i-- {
		ic, next := ics[i], last
		last = func(ctx context.Context, info *ClientInfo, req *Request, reply *Reply) error {
			return ic(ctx, info, req, reply, next)
		}
	}
	return last
}

// chainServer returns a ServerHandler that runs ics around h, or nil when
// there are none, so dispatch calls h directly.
func chainServer(ics []ServerInterceptor, h Handler) ServerHandler {
	if len(ics) == 0 {
		return nil
	}
	last := ServerHandler(func(ctx context.Context, _ *ServerInfo, req *wire.Inbound, resp *Response) error {
		return h(ctx, req, resp)
	})
	for i := len(ics) - 1; i >= 0; i-- {
		ic, next := ics[i], last
		last = func(ctx context.Context, info *ServerInfo, req *wire.Inbound, resp *Response) error {
			return ic(ctx, info, req, resp, next)
		}
	}
	return last
}

// clientInfos recycles the ClientInfo of intercepted calls: handed to
// function values, it would otherwise escape to the heap on every call.
var clientInfos = sync.Pool{New: func() any { return new(ClientInfo) }}

// intercepted runs a call through the client's chain.
func (c *Client) intercepted(ctx context.Context, m Method, req *Request, resp *Reply) error {
	info := clientInfos.Get().(*ClientInfo)
	*info = ClientInfo{Method: m, Peer: c.opts.Name}
	err := c.chain(ctx, info, req, resp)
	*info = ClientInfo{}
	clientInfos.Put(info)
	return err
}

// invoke is the last Invoker of a client's chain.
func (c *Client) invoke(ctx context.Context, info *ClientInfo, req *Request, resp *Reply) error {
	return c.call(ctx, info.Method, req, resp, info)
}

// connPath names the path calls on c take: what a PathConn says, else the
// transport's name.
func connPath(c Conn, transport string) netpath.Path {
	if pc, ok := c.(PathConn); ok {
		return pc.Path()
	}
	return netpath.Path(transport)
}

// serverInfo returns the ServerInfo of a call of m on sc, kept in the call.
func (call *serverCall) serverInfo(m *method) *ServerInfo {
	call.info = ServerInfo{Method: m.Method, Peer: call.sc.peer, Path: call.sc.path, Inline: m.opts.Inline}
	return &call.info
}

// serverConnPath names the path of a connection a server accepted: what a
// PathConn says, else the kind of socket under it.
func serverConnPath(c Conn) netpath.Path {
	if pc, ok := c.(PathConn); ok {
		return pc.Path()
	}
	switch c.LocalAddr().(type) {
	case *net.TCPAddr:
		return netpath.TCP
	case *net.UDPAddr:
		return netpath.AFXDP // the packet protocol, over AF_XDP or kernel UDP
	}
	return netpath.Path(c.LocalAddr().Network())
}
