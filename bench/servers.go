package bench

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/starwire/starwire/rpc/tcp"
)

// Addrs are the addresses of the three contenders' servers. An empty
// address leaves that contender out.
type Addrs struct {
	Starwire string
	GRPC     string
	Raw      string
}

// ErrAddrs is returned by ParseAddrs for a malformed list.
var ErrAddrs = errors.New("bench: malformed server addresses")

// String formats a as ParseAddrs reads it: "starwire=A,grpc=B,raw=C".
func (a Addrs) String() string {
	var parts []string
	for _, kv := range [...][2]string{{"starwire", a.Starwire}, {"grpc", a.GRPC}, {"raw", a.Raw}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	return strings.Join(parts, ",")
}

// ParseAddrs reads a list such as "starwire=127.0.0.1:7471,grpc=...,raw=...".
func ParseAddrs(s string) (Addrs, error) {
	var a Addrs
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || addr == "" {
			return a, fmt.Errorf("bench: %q: %w", part, ErrAddrs)
		}
		switch name {
		case "starwire":
			a.Starwire = addr
		case "grpc":
			a.GRPC = addr
		case "raw":
			a.Raw = addr
		default:
			return a, fmt.Errorf("bench: unknown server %q: %w", name, ErrAddrs)
		}
	}
	return a, nil
}

// Servers runs the three contenders' servers in this process.
type Servers struct {
	Addrs    Addrs
	Starwire *StarwireServer
	GRPC     *GRPCServer
	Raw      *RawServer
}

// StartServers starts the servers on the addresses of listen (":0" ports
// are chosen by the kernel; Addrs holds the real ones). Close stops them.
func StartServers(listen Addrs) (*Servers, error) {
	s := &Servers{Starwire: NewStarwireServer(), GRPC: NewGRPCServer(), Raw: NewRawServer()}
	tl, err := (&tcp.Transport{}).Listen(listen.Starwire)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("bench: start starwire: %w", err)
	}
	go s.Starwire.Serve(tl)
	s.Addrs.Starwire = tl.Addr().String()
	gl, err := net.Listen("tcp", listen.GRPC)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("bench: start grpc: %w", err)
	}
	go s.GRPC.Serve(gl)
	s.Addrs.GRPC = gl.Addr().String()
	rl, err := net.Listen("tcp", listen.Raw)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("bench: start raw: %w", err)
	}
	go s.Raw.Serve(rl)
	s.Addrs.Raw = rl.Addr().String()
	return s, nil
}

// Loopback are addresses on which StartServers picks free loopback ports.
var Loopback = Addrs{Starwire: "127.0.0.1:0", GRPC: "127.0.0.1:0", Raw: "127.0.0.1:0"}

// Close stops every server.
func (s *Servers) Close() error {
	s.Starwire.Close()
	s.GRPC.Close()
	s.Raw.Close()
	return nil
}
