package afxdprpc

import (
	"encoding/json"
	"fmt"
	"github.com/starwire/starwire/netpath"
)

// helloVersion is the capability format this package speaks.
const helloVersion = 1

// hello is what a peer advertises on the first frame of its TCP connection:
// where its packet endpoint listens and over what it runs there, and, in a
// listener's answer, the ticket under which the dialer may open one
// session (afxdp.Endpoint.Issue), valid while this TCP connection lasts.
// The ticket is a secret: the hello is as confidential as the TCP
// connection (TLS, when configured). It travels
// as JSON in a wire.KindHello frame; it is sent once per connection, so its
// encoding does not matter for speed, and JSON lets later versions add
// fields that older peers ignore.
type hello struct {
	Version int          `json:"version"`
	Packet  string       `json:"packet,omitempty"` // "ip:port" of the packet endpoint, if any
	Path    netpath.Path `json:"path,omitempty"`   // netpath.AFXDP or UDP
	Ticket  string       `json:"ticket,omitempty"` // afxdp.Ticket's String form, in a listener's answer
}

func (h hello) encode() []byte {
	b, err := json.Marshal(h)
	if err != nil {
		panic(fmt.Sprintf("afxdprpc: encode hello: %v", err)) // plain struct: cannot fail
	}
	return b
}

func decodeHello(b []byte) (hello, error) {
	var h hello
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("afxdprpc: hello: %w", err)
	}
	if h.Version < 1 {
		return h, fmt.Errorf("afxdprpc: hello version %d", h.Version)
	}
	return h, nil
}
