// Package afxdprpc lets package rpc run over afxdp's packet transport: it
// adapts an afxdp.Endpoint to rpc.Transport. It exists so that neither rpc
// nor afxdp imports the other.
package afxdprpc
