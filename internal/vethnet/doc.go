// Package vethnet gives the tasks of an in-process cluster network
// interfaces of their own: each task gets a network namespace, and every
// worker is joined to every parameter server by a veth pair, so that their
// traffic crosses an interface where XDP sees it and AF_XDP sockets can
// carry it. Loopback, which the tasks otherwise share, is invisible to XDP.
//
// The namespaces are anonymous: they are held by open handles and the
// sockets in them, and vanish with the last of those, so nothing is left
// behind even if the process dies.
package vethnet
