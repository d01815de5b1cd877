package xsk_test

import (
	"time"

	"github.com/starwire/starwire/internal/packet"
	"github.com/starwire/starwire/internal/xsk"
	"github.com/starwire/starwire/xdp"
)

// A reactor for one queue: receive, answer in place, kick, recycle. The
// socket must be opened in the interface's network namespace and
// registered with the steering program before traffic reaches it.
func Example() {
	const ifindex, queue = 2, 0
	prog, err := xdp.Load(xdp.Options{Ports: []uint16{7470}})
	if err != nil {
		return
	}
	defer prog.Close()
	if _, err := prog.Attach(ifindex); err != nil {
		return
	}
	s, err := xsk.Open(ifindex, queue, xsk.Config{})
	if err != nil {
		return
	}
	// Unregister before Close: the map holds a reference to the socket.
	defer s.Close()
	defer prog.UnregisterSocket(queue)
	if err := prog.RegisterSocket(queue, s.FD()); err != nil {
		return
	}

	var descs [64]xsk.Desc
	for range 1000 {
		n := s.Receive(descs[:])
		if n == 0 {
			s.Poll(10 * time.Millisecond)
			continue
		}
		for _, d := range descs[:n] {
			packet.SwapUDP4(s.Packet(d)) // the frame is ours until transmitted
		}
		s.Transmit(descs[:n]) // now the kernel's, until completion
		if err := s.Kick(); err != nil {
			return
		}
		s.ReapCompletions() // completed frames back to the free stack
		s.RefillFill()      // and from there to the fill ring
	}
}
