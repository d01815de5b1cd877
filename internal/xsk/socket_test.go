package xsk_test

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/netns"

	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/internal/packet"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/internal/xsk"
	"github.com/starwire/starwire/xdp"
)

const port = 7470

// link is one end of an AF_XDP link: the steering program attached to a
// veth end and a copy-mode socket on its only queue.
type link struct {
	end  *netns.End
	sock *xsk.Socket
	hdr  packet.UDP4 // addressing of frames this end sends
}

func newLinks(t *testing.T, cfg xsk.Config) (a, b *link) {
	t.Helper()
	pair := netnstest.NewForTest(t, netns.Options{})
	open := func(e, peer *netns.End) *link {
		prog, err := xdp.Load(xdp.Options{Ports: []uint16{port}, Queues: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { prog.Close() })
		l := &link{end: e, hdr: packet.UDP4{
			SrcIP: e.Addr.As4(), DstIP: peer.Addr.As4(), SrcPort: port, DstPort: port,
		}}
		copy(l.hdr.SrcMAC[:], e.MAC)
		copy(l.hdr.DstMAC[:], peer.MAC)
		err = e.Do(func() error {
			if _, err := prog.AttachMode(e.Ifindex, xdp.ModeGeneric); err != nil {
				return err
			}
			l.sock, err = xsk.Open(e.Ifindex, 0, cfg)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.sock.Close() })
		if err := prog.RegisterSocket(0, l.sock.FD()); err != nil {
			t.Fatal(err)
		}
		return l
	}
	return open(pair.A, pair.B), open(pair.B, pair.A)
}

// queue writes a frame carrying seq into a fresh chunk and queues it.
func (l *link) queue(t testing.TB, seq uint32) {
	addr, ok := l.sock.AllocFrame()
	if !ok {
		t.Fatal("out of frames")
	}
	f := l.sock.Frame(addr)
	binary.BigEndian.PutUint32(f[packet.UDP4HeaderLen:], seq)
	n, err := packet.WriteUDP4(f, &l.hdr, 22)
	if err != nil {
		t.Fatal(err)
	}
	if l.sock.Transmit([]xsk.Desc{{Addr: addr, Len: uint32(n)}}) != 1 {
		t.Fatal("tx ring full")
	}
}

// collect receives until want frames arrived or d passed, calling fn on
// each (fn owns the frame).
func (l *link) collect(t testing.TB, want int, d time.Duration, fn func(xsk.Desc)) int {
	var descs [64]xsk.Desc
	got := 0
	testwait.Until(d, func() bool {
		if _, err := l.sock.Poll(time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n := l.sock.Receive(descs[:])
		for _, d := range descs[:n] {
			fn(d)
		}
		got += n
		l.sock.ReapCompletions()
		l.sock.RefillFill()
		return got >= want
	})
	return got
}

func seqOf(t testing.TB, frame []byte) uint32 {
	_, payload, err := packet.ParseUDP4(frame)
	if err != nil || len(payload) < 4 {
		t.Fatalf("bad frame %x: %v", frame, err)
	}
	return binary.BigEndian.Uint32(payload)
}

func TestEchoBurst(t *testing.T) {
	a, b := newLinks(t, xsk.Config{NumFrames: 1024, Mode: xsk.ModeCopy})
	if a.sock.Mode() != xsk.ModeCopy {
		t.Fatalf("mode %s", a.sock.Mode())
	}
	const burst = 200 // several kicks' worth: the kernel takes 32 per kick
	for i := range burst {
		a.queue(t, uint32(i))
	}
	if err := a.sock.Kick(); err != nil {
		t.Fatal(err)
	}
	if p := a.sock.TxPending(); p != 0 {
		t.Fatalf("%d descriptors left after Kick", p)
	}
	// B echoes every frame in place: same chunk, headers swapped.
	echo := make([]xsk.Desc, 0, burst)
	got := b.collect(t, burst, 5*time.Second, func(d xsk.Desc) {
		if off := d.Addr % uint64(b.sock.FrameSize()); off != 256 {
			t.Errorf("copy-mode frame at offset %d into its chunk, want 256", off)
		}
		if !packet.SwapUDP4(b.sock.Packet(d)) {
			t.Error("received a frame that is not UDP/IPv4")
		}
		echo = append(echo, d)
	})
	if got != burst {
		t.Fatalf("B received %d of %d", got, burst)
	}
	if n := b.sock.Transmit(echo); n != burst {
		t.Fatalf("queued %d echoes", n)
	}
	if err := b.sock.Kick(); err != nil {
		t.Fatal(err)
	}
	next := uint32(0)
	got = a.collect(t, burst, 5*time.Second, func(d xsk.Desc) {
		if s := seqOf(t, a.sock.Packet(d)); s != next {
			t.Errorf("echo %d carries %d", next, s)
		}
		next++
		a.sock.FreeFrame(d.Addr)
	})
	if got != burst {
		t.Fatalf("A received %d of %d echoes", got, burst)
	}
	// Every chunk is accounted for: on the free stack or on the fill ring.
	for _, l := range []*link{a, b} {
		// The kernel completes the sends in its own time (ksoftirqd on a
		// loaded machine).
		testwait.Until(10*time.Second, func() bool {
			l.sock.ReapCompletions()
			if l.sock.FreeFrames() == 1024-512 {
				return true
			}
			l.sock.RefillFill()
			return false
		})
		if n := l.sock.FreeFrames(); n != 1024-512 {
			t.Fatalf("%s: %d free frames, want %d", l.end.Link, n, 1024-512)
		}
	}
	st, err := b.sock.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Rx_dropped != 0 || st.Rx_invalid_descs != 0 || st.Tx_invalid_descs != 0 {
		t.Fatalf("kernel stats %+v", st)
	}
}

func TestPingPongAllocatesNothing(t *testing.T) {
	a, b := newLinks(t, xsk.Config{NumFrames: 256})
	var descs [8]xsk.Desc
	seq := uint32(0)
	roundTrip := func() {
		seq++
		a.queue(t, seq)
		if err := a.sock.Kick(); err != nil {
			t.Fatal(err)
		}
		n := b.collect(t, 1, 2*time.Second, func(d xsk.Desc) { descs[0] = d; packet.SwapUDP4(b.sock.Packet(d)) })
		if n != 1 {
			t.Fatal("ping lost")
		}
		b.sock.Transmit(descs[:1])
		if err := b.sock.Kick(); err != nil {
			t.Fatal(err)
		}
		n = a.collect(t, 1, 2*time.Second, func(d xsk.Desc) {
			if s := seqOf(t, a.sock.Packet(d)); s != seq {
				t.Fatalf("pong %d for ping %d", s, seq)
			}
			a.sock.FreeFrame(d.Addr)
		})
		if n != 1 {
			t.Fatal("pong lost")
		}
	}
	roundTrip() // warm up (ARP is not involved: frames carry MACs)
	if allocs := testing.AllocsPerRun(200, roundTrip); allocs != 0 {
		t.Fatalf("%v allocations per round trip", allocs)
	}
}

func TestTxRingFull(t *testing.T) {
	a, _ := newLinks(t, xsk.Config{NumFrames: 64, TxSize: 16})
	descs := make([]xsk.Desc, 20)
	for i := range descs {
		addr, _ := a.sock.AllocFrame()
		n, _ := packet.WriteUDP4(a.sock.Frame(addr), &a.hdr, 8)
		descs[i] = xsk.Desc{Addr: addr, Len: uint32(n)}
	}
	if n := a.sock.Transmit(descs); n != 16 {
		t.Fatalf("queued %d on a 16-slot ring", n)
	}
	if err := a.sock.Kick(); err != nil {
		t.Fatal(err)
	}
	if n := a.sock.Transmit(descs[16:]); n != 4 {
		t.Fatalf("queued %d after the kick", n)
	}
	if err := a.sock.Kick(); err != nil {
		t.Fatal(err)
	}
	reaped := 0
	testwait.Until(10*time.Second, func() bool { reaped += a.sock.ReapCompletions(); return reaped >= 20 })
	if reaped != 20 {
		t.Fatalf("reaped %d of 20 completions", reaped)
	}
}

func fdCount(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestOpenFailsCleanly(t *testing.T) {
	netnstest.Require(t)
	before := fdCount(t)
	if _, err := xsk.Open(1<<20, 0, xsk.Config{}); err == nil {
		t.Fatal("bound to a missing interface")
	}
	if _, err := xsk.Open(1, 0, xsk.Config{FrameSize: 3000}); !errors.Is(err, xsk.ErrConfig) {
		t.Fatalf("bad frame size: %v", err)
	}
	if after := fdCount(t); after != before {
		t.Fatalf("%d file descriptors before, %d after failed opens", before, after)
	}
}

func TestClosedSocket(t *testing.T) {
	a, _ := newLinks(t, xsk.Config{NumFrames: 64})
	if err := a.sock.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.sock.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s := a.sock
	if s.Receive(make([]xsk.Desc, 4)) != 0 || s.Transmit([]xsk.Desc{{}}) != 0 || s.RefillFill() != 0 ||
		s.ReapCompletions() != 0 || s.TxPending() != 0 {
		t.Fatal("ring operation did something on a closed socket")
	}
	for name, err := range map[string]error{
		"Kick":   s.Kick(),
		"WakeRx": s.WakeRx(),
		"Poll":   func() error { _, err := s.Poll(0); return err }(),
		"Stats":  func() error { _, err := s.Stats(); return err }(),
	} {
		if !errors.Is(err, xsk.ErrClosed) {
			t.Errorf("%s on a closed socket: %v", name, err)
		}
	}
}

func TestBindOptions(t *testing.T) {
	pair := netnstest.NewForTest(t, netns.Options{})
	tests := []struct {
		name       string
		cfg        xsk.Config
		wantErr    bool
		wantWakeup bool
	}{
		{"copy with need-wakeup", xsk.Config{NumFrames: 64, Mode: xsk.ModeCopy}, false, true},
		{"copy without need-wakeup", xsk.Config{NumFrames: 64, Mode: xsk.ModeCopy, NoNeedWakeup: true}, false, false},
		{"auto falls back to copy on veth", xsk.Config{NumFrames: 64}, false, true},
		{"zero-copy is refused on veth", xsk.Config{NumFrames: 64, Mode: xsk.ModeZeroCopy}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s *xsk.Socket
			err := pair.A.Do(func() (err error) {
				s, err = xsk.Open(pair.A.Ifindex, 0, tt.cfg)
				return err
			})
			if tt.wantErr {
				if err == nil {
					s.Close()
					t.Fatal("bound")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Mode() != xsk.ModeCopy || s.UsesNeedWakeup() != tt.wantWakeup {
				t.Fatalf("mode %s, need-wakeup %v", s.Mode(), s.UsesNeedWakeup())
			}
			if !tt.wantWakeup && (!s.TxNeedsWakeup() || !s.FillNeedsWakeup()) {
				t.Fatal("without need-wakeup every ring must report it needs one")
			}
		})
	}
}

// TestFrameSizeBound: a 2 KiB chunk takes frames up to 2048-256 bytes in
// copy mode; a larger one is dropped and counted.
func TestFrameSizeBound(t *testing.T) {
	pair := netnstest.NewForTest(t, netns.Options{MTU: 9000})
	prog, err := xdp.Load(xdp.Options{Ports: []uint16{port}, Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	var s *xsk.Socket
	err = pair.B.Do(func() (err error) {
		if _, err := prog.AttachMode(pair.B.Ifindex, xdp.ModeGeneric); err != nil {
			return err
		}
		s, err = xsk.Open(pair.B.Ifindex, 0, xsk.Config{NumFrames: 64})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.UnregisterSocket(0); s.Close() })
	if err := prog.RegisterSocket(0, s.FD()); err != nil {
		t.Fatal(err)
	}
	b := &link{end: pair.B, sock: s}
	a := &link{end: pair.A, hdr: packet.UDP4{SrcIP: pair.A.Addr.As4(), DstIP: pair.B.Addr.As4(), SrcPort: port, DstPort: port}}
	copy(a.hdr.SrcMAC[:], pair.A.MAC)
	copy(a.hdr.DstMAC[:], pair.B.MAC)
	// Send from A with a raw packet socket, so the frame length is exact.
	send := func(frameLen int) {
		t.Helper()
		err := pair.A.Do(func() error {
			fd, err := unixSocketPacket()
			if err != nil {
				return err
			}
			defer closeFD(fd)
			frame := make([]byte, frameLen)
			if _, err := packet.WriteUDP4(frame, &a.hdr, frameLen-packet.UDP4HeaderLen); err != nil {
				return err
			}
			return sendPacket(fd, pair.A.Ifindex, frame)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		frameLen int
		want     int
	}{{1792, 1}, {1793, 0}} {
		send(tt.frameLen)
		got := b.collect(t, 1, 300*time.Millisecond, func(d xsk.Desc) {
			if int(d.Len) != tt.frameLen {
				t.Errorf("received %d bytes, sent %d", d.Len, tt.frameLen)
			}
			s.FreeFrame(d.Addr)
		})
		if got != tt.want {
			t.Fatalf("%d-byte frame: received %d, want %d", tt.frameLen, got, tt.want)
		}
	}
	if st, err := s.Stats(); err != nil || st.Rx_dropped != 1 {
		t.Fatalf("stats %+v, %v: want one drop", st, err)
	}
}
