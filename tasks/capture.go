package tasks

import (
	"io"

	"github.com/starwire/starwire/afxdp/link"
)

// A Capture records the frames of a task's packet path, as a pcap file
// does: AF_XDP links write their frames to a Stream, and kernel UDP links
// are wrapped so that their datagrams are recorded as the kernel framed
// them. Implementations are safe for concurrent use.
type Capture interface {
	// Stream returns a writer of whole Ethernet frames, one link's.
	Stream() io.Writer
	// Link returns l, its datagrams recorded as they pass.
	Link(l link.Link) link.Link
}
