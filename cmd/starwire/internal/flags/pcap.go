package flags

import (
	"flag"
	"fmt"
	"io"

	"github.com/starwire/starwire/internal/capture"
	"github.com/starwire/starwire/tasks"
)

// Pcap is --pcap, which train and serve share.
type Pcap struct {
	Path string
	File *capture.File
}

// Register adds the flags to fs.
func (f *Pcap) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Path, "pcap", "", "write the packet path's frames (AF_XDP, or --transport udp's datagrams as the kernel framed them) to this pcap file")
}

// Open creates the file when asked for and has t's UDP endpoints write to
// it; AF_XDP links are given it through the tasks.
func (f *Pcap) Open(cmd string, t *Transport) error {
	if f.Path == "" {
		return nil
	}
	file, err := capture.Create(f.Path)
	if err != nil {
		return fmt.Errorf("%s: --pcap: %w", cmd, err)
	}
	f.File = file
	if u, ok := t.Net.(tasks.UDPNet); ok {
		u.Pcap = file
		t.Net = u
	}
	return nil
}

// Capture returns the file as the tasks take it: nil, not a nil
// *capture.File, when --pcap is not given.
func (f *Pcap) Capture() tasks.Capture {
	if f.File == nil {
		return nil
	}
	return f.File
}

// Close closes the file and says what it holds.
func (f *Pcap) Close(cmd string, stdout io.Writer) error {
	if f.File == nil {
		return nil
	}
	n := f.File.Frames()
	if err := f.File.Close(); err != nil {
		return fmt.Errorf("%s: --pcap: %w", cmd, err)
	}
	if n == 0 {
		// An empty file alone reads as a capture that failed.
		fmt.Fprintf(stdout, "pcap: 0 frames in %s: no frame went over the packet path, which is all --pcap captures (AF_XDP links, --transport udp's datagrams); calls over TCP are not in it\n", f.Path)
		return nil
	}
	fmt.Fprintf(stdout, "pcap: %d frames in %s\n", n, f.Path)
	return nil
}
