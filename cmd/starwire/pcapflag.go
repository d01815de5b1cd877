package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/starwire/starwire/cmd/starwire/internal/capture"
	"github.com/starwire/starwire/cmd/starwire/internal/tasks"
)

// pcapFlag is --pcap, which train and serve share.
type pcapFlag struct {
	path string
	file *capture.File
}

func (f *pcapFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&f.path, "pcap", "", "write the packet path's frames (AF_XDP, or --transport udp's datagrams as the kernel framed them) to this pcap file")
}

// open creates the file when asked for and has t's UDP endpoints write to
// it; AF_XDP links are given it through the tasks.
func (f *pcapFlag) open(cmd string, t *transportChoice) error {
	if f.path == "" {
		return nil
	}
	file, err := capture.Create(f.path)
	if err != nil {
		return fmt.Errorf("%s: --pcap: %w", cmd, err)
	}
	f.file = file
	if u, ok := t.net.(tasks.UDPNet); ok {
		u.Pcap = file
		t.net = u
	}
	return nil
}

// close closes the file and says what it holds.
func (f *pcapFlag) close(cmd string, stdout io.Writer) error {
	if f.file == nil {
		return nil
	}
	n := f.file.Frames()
	if err := f.file.Close(); err != nil {
		return fmt.Errorf("%s: --pcap: %w", cmd, err)
	}
	fmt.Fprintf(stdout, "pcap: %d frames in %s\n", n, f.path)
	return nil
}
