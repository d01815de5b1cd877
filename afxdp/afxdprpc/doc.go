// Package afxdprpc lets package rpc run over afxdp's packet transport:
// Transport adapts an afxdp.Endpoint or Group to rpc.Transport, and Dual
// chooses a path per peer, starting on a stream transport (TCP) and moving
// calls to the packet path when both ends have AF_XDP. It exists so that
// neither rpc nor afxdp imports the other.
package afxdprpc
