package capture

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

var mEcho = rpc.NewMethod("Echo")

// Calls over two wrapped links land in one capture in which every frame
// dissects, with the checksums the kernel would have written.
func TestLinkCapture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pcap")
	file, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	a, b := netip.MustParseAddrPort("198.18.0.1:7000"), netip.MustParseAddrPort("198.18.0.2:7000")
	la, lb := link.MemPair(a, b, link.MemOptions{})
	ea, eb := afxdp.NewEndpoint(file.Link(la), afxdp.Options{Ticket: &testTicket}), afxdp.NewEndpoint(file.Link(lb), afxdp.Options{Ticket: &testTicket})
	srv := rpc.NewServer()
	srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	l, err := afxdprpc.Transport(eb).Listen("")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	c := rpc.NewClient(b.String(), rpc.ClientOptions{Transport: afxdprpc.Transport(ea)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var reply rpc.Reply
	for _, n := range []int{10, 3000, 20000} { // one packet, several, many
		if err := c.Call(ctx, mEcho, &rpc.Request{Meta: make([]byte, n)}, &reply); err != nil {
			t.Fatal(err)
		}
		reply.Release()
	}
	c.Close()
	srv.Close()
	ea.Close()
	eb.Close()
	frames := file.Frames()
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := Check(f)
	if err != nil {
		t.Fatal(err)
	}
	if n != frames || n < 2*(1+3+14) {
		t.Fatalf("%d frames checked, %d written; want both ends' packets of three calls", n, frames)
	}
}

// A stream written in arbitrary pieces, as an AF_XDP link's capture is,
// reaches the file as whole records, its own file header dropped.
func TestStreamReassembles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.pcap")
	file, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var src bytes.Buffer
	w := pcapgo.NewWriter(&src)
	w.WriteFileHeader(snapLen, layers.LinkTypeEthernet)
	want := [][]byte{bytes.Repeat([]byte{1}, 60), bytes.Repeat([]byte{2}, 1500), bytes.Repeat([]byte{3}, 99)}
	for _, p := range want {
		w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 123000), CaptureLength: len(p), Length: len(p)}, p)
	}
	s := file.Stream()
	for b := src.Bytes(); len(b) > 0; {
		k := min(7, len(b))
		s.Write(b[:k])
		b = b[k:]
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range want {
		got, ci, err := r.ReadPacketData()
		if err != nil || !bytes.Equal(got, p) || !ci.Timestamp.Equal(time.Unix(1700000000, 123000)) {
			t.Fatalf("record %d: %d bytes at %v, %v", i, len(got), ci.Timestamp, err)
		}
	}
	if _, _, err := r.ReadPacketData(); err == nil {
		t.Fatal("more records than written")
	}
}
