package netpath

// A Path is what carried a call: a stream or one of the links the packet
// protocol runs over. Its value is the name users see (metrics label
// path=, rpc.ClientInfo.Path, the hello's path field).
type Path string

// The paths.
const (
	// TCP is the stream path: rpc/tcp's transport, also the control path
	// of a dual connection.
	TCP Path = "tcp"
	// AFXDP is the AF_XDP path: afxdp's packet protocol over AF_XDP
	// sockets on an interface's queues, bypassing the kernel's stack.
	AFXDP Path = "afxdp"
	// UDP is afxdp's packet protocol over a kernel UDP socket, where
	// AF_XDP is unavailable (afxdp.Open's fallback, serve --transport udp).
	UDP Path = "udp"
)

// String returns the path's name.
func (p Path) String() string { return string(p) }

// Title names the path in prose, as summaries and reports write it.
func (p Path) Title() string {
	switch p {
	case TCP:
		return "TCP"
	case AFXDP:
		return "AF_XDP"
	case UDP:
		return "the afxdp packet protocol on kernel UDP"
	}
	return string(p)
}
