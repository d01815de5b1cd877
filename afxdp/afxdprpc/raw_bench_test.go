package afxdprpc_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	asavie "github.com/asavie/xdp"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/starwire/starwire/internal/cpuclock"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/internal/packet"
	"github.com/starwire/starwire/internal/xsk"
	"github.com/starwire/starwire/xdp"
)

// The raw echo benchmark compares, in one run over one 1-queue veth pair
// between two namespaces, a 64-byte UDP frame echo over AF_XDP in copy mode
// with this module's socket layer and with asavie/xdp, and a kernel UDP
// ping-pong, each waiting by spinning or in poll(). The client sends a
// frame carrying a sequence number; the server swaps addresses and ports
// in place and sends it back.
const (
	rawPort       = 7470 // steered to AF_XDP
	kernelPort    = 7471 // not steered: the kernel's UDP socket
	rawPayload    = 64 - packet.UDP4HeaderLen
	resendAfter   = 5 * time.Millisecond // a lost frame is sent again
	roundTripCap  = 2 * time.Second      // an iteration fails after this
	serverIdle    = 10 * time.Millisecond
	maxRTTSamples = 1 << 20
)

// wait is how an idle end waits for the next frame.
type wait int

const (
	// spin polls the RX ring in a loop: a core per end.
	spin wait = iota
	// spinYield spins, but calls sched_yield once idle for spinBudget, so
	// kernel threads (ksoftirqd) sharing the core get to run.
	spinYield
	// hybrid spins for spinBudget, then sleeps in poll().
	hybrid
	// sleep goes straight to poll().
	sleep
)

var waits = []struct {
	name string
	mode wait
}{{"spin", spin}, {"spin-yield", spinYield}, {"hybrid", hybrid}, {"poll", sleep}}

// spinBudget is how long an idle end spins before yielding or sleeping.
const spinBudget = 20 * time.Microsecond

// idle waits once per the mode; idleSince is when the end ran out of
// work, limit how long poll may sleep. It reports nothing; callers loop.
func (w wait) idle(idleSince, now time.Time, limit time.Duration, poll func(time.Duration)) {
	switch w {
	case spinYield:
		if now.Sub(idleSince) > spinBudget {
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	case hybrid:
		if now.Sub(idleSince) > spinBudget {
			poll(limit)
		}
	case sleep:
		poll(limit)
	}
}

// current is w, or sleep while an A/B server is not the one measured.
func current(w wait, active *atomic.Bool) wait {
	if active != nil && !active.Load() {
		return sleep
	}
	return w
}

// pinger is one client implementation.
type pinger interface {
	// send transmits a frame carrying seq.
	send(b *testing.B, seq uint32)
	// recv reports whether the echo of seq arrived before deadline;
	// stale echoes are consumed and ignored.
	recv(b *testing.B, seq uint32, deadline time.Time) bool
}

// echoResult is what an echo benchmark measured.
type echoResult struct {
	rate float64 // round trips per second
	p50  float64 // median round trip, ns
	sys  float64 // kernel CPU a round trip, both ends, ns (0: not measured)
}

// drive runs the benchmark loop: one round trip per iteration, resending
// after resendAfter, failing after roundTripCap.
func drive(b *testing.B, p pinger) echoResult { return driveWith(b, p, 0) }

// driveWith is drive against an echo server in process serverPID (0: this
// one), whose CPU time counts with this process's: it reports the CPU, and
// the kernel's part of it, a round trip takes at both ends.
func driveWith(b *testing.B, p pinger, serverPID int) echoResult {
	samples := make([]int64, 0, maxRTTSamples)
	resends := 0
	var seq uint32
	warmUp(b, p)
	b.ReportAllocs()
	b.SetBytes(2 * 64)
	cpu := func() cpuclock.Times { t, _ := cpuclock.SelfAnd(serverPID); return t }
	cpu0 := cpu()
	start := time.Now()
	for b.Loop() {
		seq++
		d, r := roundTrip(b, p, seq)
		resends += r
		if len(samples) < cap(samples) {
			samples = append(samples, int64(d))
		}
	}
	elapsed := time.Since(start)
	used := cpu().Sub(cpu0)
	b.ReportMetric(float64(used.Total())/float64(max(seq, 1)), "cpu-ns/op")
	b.ReportMetric(float64(used.System)/float64(max(seq, 1)), "sys-ns/op")
	res := echoResult{rate: float64(seq) / elapsed.Seconds(), sys: float64(used.System) / float64(max(seq, 1))}
	if len(samples) > 0 {
		reportRTT(b, "", res.rate, samples)
		res.p50 = float64(samples[len(samples)/2])
	}
	b.ReportMetric(float64(resends), "resends")
	b.ReportMetric(0, "ns/op") // rt/s says it better
	return res
}

// warmUp makes one untimed round trip so both ends are warm.
func warmUp(b *testing.B, p pinger) {
	p.send(b, 0)
	if !p.recv(b, 0, time.Now().Add(roundTripCap)) {
		b.Fatal("no echo of the warm-up frame")
	}
}

// roundTrip sends seq until its echo arrives, resending after
// resendAfter, failing after roundTripCap; it returns the time taken and
// the number of resends.
func roundTrip(b *testing.B, p pinger, seq uint32) (time.Duration, int) {
	t0 := time.Now()
	giveUp := t0.Add(roundTripCap)
	for resends := 0; ; resends++ {
		p.send(b, seq)
		if p.recv(b, seq, earliest(time.Now().Add(resendAfter), giveUp)) {
			return time.Since(t0), resends
		}
		if time.Now().After(giveUp) {
			b.Fatalf("no echo of frame %d within %v", seq, roundTripCap)
		}
	}
}

// reportRTT reports a rate and the median and 99th percentile of samples
// (sorted in place), with metric names prefixed by prefix.
func reportRTT(b *testing.B, prefix string, rate float64, samples []int64) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	b.ReportMetric(rate, prefix+"rt/s")
	b.ReportMetric(float64(samples[len(samples)/2]), prefix+"p50-ns")
	b.ReportMetric(float64(samples[len(samples)*99/100]), prefix+"p99-ns")
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// rawEnv is the pair of namespaces with the steering program attached to
// both veth ends in generic mode (lower latency than native on veth).
type rawEnv struct {
	pair                 *netns.Pair
	progA, progB         *xdp.Program
	toB                  packet.UDP4
	asavieCli, asavieSrv *asavie.Socket
}

func newRawEnv(b *testing.B) *rawEnv { return newRawEnvMTU(b, 0) }

// newRawEnvMTU is newRawEnv over veths with the given MTU (0: the default).
func newRawEnvMTU(b *testing.B, mtu int) *rawEnv {
	e := &rawEnv{pair: netnstest.NewForTest(b, netns.Options{Queues: 1, MTU: mtu})}
	attach := func(end *netns.End) *xdp.Program {
		p, err := xdp.Load(xdp.Options{Ports: []uint16{rawPort}, Queues: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		if err := end.Do(func() error { _, err := p.AttachMode(end.Ifindex, xdp.ModeGeneric); return err }); err != nil {
			b.Fatal(err)
		}
		return p
	}
	e.progA, e.progB = attach(e.pair.A), attach(e.pair.B)
	a, bb := e.pair.A, e.pair.B
	e.toB = packet.UDP4{SrcIP: a.Addr.As4(), DstIP: bb.Addr.As4(), SrcPort: rawPort, DstPort: rawPort}
	copy(e.toB.SrcMAC[:], a.MAC)
	copy(e.toB.DstMAC[:], bb.MAC)
	return e
}

// serve runs loop on a thread in B until stop, and returns a wait function.
func serve(b *testing.B, e *rawEnv, loop func(stop *atomic.Bool)) (stop func()) {
	var flag atomic.Bool
	done := make(chan struct{})
	if err := e.pair.B.Go(func() { defer close(done); loop(&flag) }); err != nil {
		b.Fatal(err)
	}
	return func() {
		flag.Store(true)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			b.Error("echo server did not stop")
		}
	}
}

func seqOf(frame []byte) (uint32, bool) {
	_, payload, err := packet.ParseUDP4(frame)
	if err != nil || len(payload) < 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(payload), true
}

// --- this module's socket layer ---

type xskClient struct {
	s     *xsk.Socket
	hdr   *packet.UDP4
	wait  wait
	poll  func(time.Duration)
	tx    [1]xsk.Desc
	descs [16]xsk.Desc
}

func (c *xskClient) send(b *testing.B, seq uint32) {
	c.s.ReapCompletions()
	addr, ok := c.s.AllocFrame()
	if !ok {
		b.Fatal("client out of frames")
	}
	f := c.s.Frame(addr)
	binary.BigEndian.PutUint32(f[packet.UDP4HeaderLen:], seq)
	n, err := packet.WriteUDP4(f, c.hdr, rawPayload)
	if err != nil {
		b.Fatal(err)
	}
	c.tx[0] = xsk.Desc{Addr: addr, Len: uint32(n)}
	if c.s.Transmit(c.tx[:]) != 1 {
		b.Fatal("client tx ring full")
	}
	if err := c.s.Kick(); err != nil {
		b.Fatal(err)
	}
}

func (c *xskClient) recv(b *testing.B, seq uint32, deadline time.Time) bool {
	idleSince := time.Now()
	for {
		n := c.s.Receive(c.descs[:])
		got := false
		for _, d := range c.descs[:n] {
			if s, ok := seqOf(c.s.Packet(d)); ok && s == seq {
				got = true
			}
			c.s.FreeFrame(d.Addr)
		}
		if n > 0 {
			c.s.RefillFill()
		}
		if got {
			return true
		}
		now := time.Now()
		if !now.Before(deadline) {
			return false
		}
		c.wait.idle(idleSince, now, deadline.Sub(now), c.poll)
	}
}

func xskPoll(s *xsk.Socket) func(time.Duration) {
	return func(d time.Duration) { s.Poll(d) }
}

// xskEcho is the echo server loop. While active is false (nil means
// always active) it waits in poll() whatever w says, so an idle server
// does not compete for the CPU with the one being measured.
func xskEcho(s *xsk.Socket, w wait, active *atomic.Bool) func(stop *atomic.Bool) {
	return func(stop *atomic.Bool) {
		var descs [64]xsk.Desc
		poll := xskPoll(s)
		idleSince := time.Now()
		for !stop.Load() {
			n := s.Receive(descs[:])
			if n == 0 {
				current(w, active).idle(idleSince, time.Now(), serverIdle, poll)
				continue
			}
			for _, d := range descs[:n] {
				packet.SwapUDP4(s.Packet(d))
			}
			s.Transmit(descs[:n])
			s.Kick()
			s.ReapCompletions()
			s.RefillFill()
			idleSince = time.Now()
		}
	}
}

// xskSockets opens a client socket in A and a server socket in B and
// registers them; b's cleanup closes them.
func (e *rawEnv) xskSockets(b *testing.B) (cli, srv *xsk.Socket) {
	open := func(end *netns.End, p *xdp.Program) *xsk.Socket {
		var s *xsk.Socket
		err := end.Do(func() (err error) {
			s, err = xsk.Open(end.Ifindex, 0, xsk.Config{NumFrames: 1024, Mode: xsk.ModeCopy})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.RegisterSocket(0, s.FD()); err != nil {
			b.Fatal(err)
		}
		// The map holds a reference to the socket: unregister first, or
		// the queue stays bound after Close.
		b.Cleanup(func() {
			p.UnregisterSocket(0)
			s.Close()
		})
		return s
	}
	return open(e.pair.A, e.progA), open(e.pair.B, e.progB)
}

func benchXSK(b *testing.B, e *rawEnv, w wait) echoResult {
	cli, srv := e.xskSockets(b)
	stop := serve(b, e, xskEcho(srv, w, nil))
	defer stop()
	return drive(b, &xskClient{s: cli, hdr: &e.toB, wait: w, poll: xskPoll(cli)})
}

// --- asavie/xdp v0.3.3 ---
//
// Its Transmit kicks once per call and panics on an unexpected sendto
// error; its Poll takes milliseconds; GetDescs scans every frame.

type asavieClient struct {
	s    *asavie.Socket
	hdr  *packet.UDP4
	wait wait
	poll func(time.Duration)
	tx   [1]asavie.Desc
}

// asaviePoll rounds up to its millisecond timeout.
func asaviePoll(s *asavie.Socket) func(time.Duration) {
	return func(d time.Duration) { s.Poll(int((d + time.Millisecond - 1) / time.Millisecond)) }
}

func asavieRefill(s *asavie.Socket) {
	if n := s.NumFreeFillSlots(); n > 0 {
		s.Fill(s.GetDescs(n))
	}
}

func (c *asavieClient) send(b *testing.B, seq uint32) {
	if n := c.s.NumCompleted(); n > 0 {
		c.s.Complete(n)
	}
	descs := c.s.GetDescs(1)
	if len(descs) == 0 {
		b.Fatal("asavie client out of frames")
	}
	f := c.s.GetFrame(descs[0])
	binary.BigEndian.PutUint32(f[packet.UDP4HeaderLen:], seq)
	n, err := packet.WriteUDP4(f, c.hdr, rawPayload)
	if err != nil {
		b.Fatal(err)
	}
	c.tx[0] = asavie.Desc{Addr: descs[0].Addr, Len: uint32(n)}
	if c.s.Transmit(c.tx[:]) != 1 {
		b.Fatal("asavie client tx ring full")
	}
}

func (c *asavieClient) recv(b *testing.B, seq uint32, deadline time.Time) bool {
	idleSince := time.Now()
	for {
		got := false
		if n := c.s.NumReceived(); n > 0 {
			for _, d := range c.s.Receive(n) {
				if s, ok := seqOf(c.s.GetFrame(d)); ok && s == seq {
					got = true
				}
			}
			asavieRefill(c.s)
		}
		if got {
			return true
		}
		now := time.Now()
		if !now.Before(deadline) {
			return false
		}
		c.wait.idle(idleSince, now, deadline.Sub(now), c.poll)
	}
}

// asavieEcho is xskEcho for asavie/xdp.
func asavieEcho(s *asavie.Socket, w wait, active *atomic.Bool) func(stop *atomic.Bool) {
	return func(stop *atomic.Bool) {
		poll := asaviePoll(s)
		idleSince := time.Now()
		for !stop.Load() {
			n := s.NumReceived()
			if n == 0 {
				current(w, active).idle(idleSince, time.Now(), serverIdle, poll)
				continue
			}
			descs := s.Receive(n)
			for _, d := range descs {
				packet.SwapUDP4(s.GetFrame(d))
			}
			s.Transmit(descs)
			if c := s.NumCompleted(); c > 0 {
				s.Complete(c)
			}
			asavieRefill(s)
			idleSince = time.Now()
		}
	}
}

// asavieSockets opens the client and server sockets once per environment:
// asavie's Close never unmaps the rings, and a mapping keeps the socket and
// its queue binding alive for the life of the process, so its sockets are
// reused across wait modes and run after every other AF_XDP variant.
func (e *rawEnv) asavieSockets(b *testing.B) (cli, srv *asavie.Socket) {
	if e.asavieCli != nil {
		return e.asavieCli, e.asavieSrv
	}
	asavie.DefaultSocketFlags = unix.XDP_COPY
	opts := asavie.SocketOptions{NumFrames: 1024, FrameSize: 2048, FillRingNumDescs: 512,
		CompletionRingNumDescs: 512, RxRingNumDescs: 512, TxRingNumDescs: 512}
	open := func(end *netns.End, p *xdp.Program) *asavie.Socket {
		var s *asavie.Socket
		err := end.Do(func() (err error) {
			// Like xsk.Open, retry EBUSY while the kernel releases the
			// previous socket's hold on the queue.
			for range 100 {
				if s, err = asavie.NewSocket(end.Ifindex, 0, &opts); err == nil || !strings.Contains(err.Error(), "busy") {
					break
				}
				time.Sleep(5 * time.Millisecond) // paces the retries while the kernel lets go
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		asavieRefill(s)
		if err := p.RegisterSocket(0, s.FD()); err != nil {
			b.Fatal(err)
		}
		return s
	}
	e.asavieCli, e.asavieSrv = open(e.pair.A, e.progA), open(e.pair.B, e.progB)
	return e.asavieCli, e.asavieSrv
}

func (e *rawEnv) closeAsavie() {
	if e.asavieCli != nil {
		e.progA.UnregisterSocket(0)
		e.progB.UnregisterSocket(0)
		e.asavieCli.Close()
		e.asavieSrv.Close()
	}
}

func benchAsavie(b *testing.B, e *rawEnv, w wait) {
	cli, srv := e.asavieSockets(b)
	stop := serve(b, e, asavieEcho(srv, w, nil))
	defer stop()
	drive(b, &asavieClient{s: cli, hdr: &e.toB, wait: w, poll: asaviePoll(cli)})
}

// --- kernel UDP ---

type udpClient struct {
	c   *net.UDPConn
	buf [rawPayload]byte
	in  [2048]byte
}

func (c *udpClient) send(b *testing.B, seq uint32) {
	binary.BigEndian.PutUint32(c.buf[:], seq)
	if _, err := c.c.Write(c.buf[:]); err != nil {
		b.Fatal(err)
	}
}

func (c *udpClient) recv(b *testing.B, seq uint32, deadline time.Time) bool {
	if err := c.c.SetReadDeadline(deadline); err != nil {
		b.Fatal(err)
	}
	for {
		n, err := c.c.Read(c.in[:])
		if err != nil {
			return false // deadline
		}
		if n >= 4 && binary.BigEndian.Uint32(c.in[:]) == seq {
			return true
		}
	}
}

func benchKernelUDP(b *testing.B, e *rawEnv) {
	var srv, cli *net.UDPConn
	err := e.pair.B.Do(func() (err error) {
		srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(e.pair.B.Addr, kernelPort)))
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	err = e.pair.A.Do(func() (err error) {
		cli, err = net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf [2048]byte
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf[:])
			if err != nil {
				return // closed
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	defer func() { srv.Close(); <-done }()
	drive(b, &udpClient{c: cli})
}

// BenchmarkRawEcho measures 64-byte round trips; run it with
//
//	go test ./afxdp/afxdprpc -run '^$' -bench RawEcho -benchtime 3s
func BenchmarkRawEcho(b *testing.B) {
	// Both ends share the machine's cores with whatever else runs: record
	// the load so figures can be judged.
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average at start: %s", strings.TrimSpace(string(load)))
	}
	e := newRawEnv(b)
	defer e.closeAsavie()
	for _, w := range waits {
		b.Run("xsk/"+w.name, func(b *testing.B) { benchXSK(b, e, w.mode) })
	}
	for _, w := range waits {
		b.Run("xsk-2proc/"+w.name, func(b *testing.B) { benchXSKProcess(b, e, w.mode) })
	}
	for _, w := range waits {
		b.Run("asavie/"+w.name, func(b *testing.B) { benchAsavie(b, e, w.mode) })
	}
	b.Run("kernel-udp/netpoll", func(b *testing.B) { benchKernelUDP(b, e) })
}

// BenchmarkRawOneWay sends frames from A to B in batches of 64 per kick
// with this module's socket layer, copy mode, both ends spinning with
// sched_yield when idle (pure spinning starves the softirq thread). Each
// iteration is one frame; the sender keeps at most a window of frames
// unreceived so it measures delivery, not drops.
//
//	go test ./afxdp/afxdprpc -run '^$' -bench RawOneWay -benchtime 2000000x
func BenchmarkRawOneWay(b *testing.B) {
	e := newRawEnv(b)
	for _, size := range []int{64, 1500} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) { benchOneWay(b, e, size, 0) })
	}
}

// benchOneWay returns the frame bytes received per second. frameSize is
// the UMEM chunk size (0: the default, 2048).
func benchOneWay(b *testing.B, e *rawEnv, size, frameSize int) float64 {
	const batch, window = 64, 384
	open := func(end *netns.End, p *xdp.Program) *xsk.Socket {
		var s *xsk.Socket
		err := end.Do(func() (err error) {
			s, err = xsk.Open(end.Ifindex, 0, xsk.Config{NumFrames: 2048, FrameSize: frameSize, Mode: xsk.ModeCopy})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := p.RegisterSocket(0, s.FD()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.UnregisterSocket(0); s.Close() })
		return s
	}
	cli, srv := open(e.pair.A, e.progA), open(e.pair.B, e.progB)
	var received atomic.Int64
	stop := serve(b, e, func(stop *atomic.Bool) {
		var descs [64]xsk.Desc
		idleSince := time.Now()
		for !stop.Load() {
			n := srv.Receive(descs[:])
			if n == 0 {
				spinYield.idle(idleSince, time.Now(), 0, nil)
				continue
			}
			idleSince = time.Now()
			for _, d := range descs[:n] {
				srv.FreeFrame(d.Addr)
			}
			srv.RefillFill()
			received.Add(int64(n))
		}
	})
	defer stop()

	descs := make([]xsk.Desc, batch)
	payload := size - packet.UDP4HeaderLen
	sent := int64(0)
	b.ReportAllocs()
	b.SetBytes(int64(size))
	start := time.Now()
	queued := 0
	flush := func() {
		for off := 0; off < queued; {
			off += cli.Transmit(descs[off:queued])
			if err := cli.Kick(); err != nil {
				b.Fatal(err)
			}
		}
		sent += int64(queued)
		queued = 0
		waitStart := time.Now()
		giveUp := waitStart.Add(roundTripCap)
		for sent-received.Load() > window {
			now := time.Now()
			if now.After(giveUp) {
				b.Fatalf("receiver stuck at %d of %d frames", received.Load(), sent)
			}
			cli.ReapCompletions()
			spinYield.idle(waitStart, now, 0, nil)
		}
	}
	for b.Loop() {
		cli.ReapCompletions()
		addr, ok := cli.AllocFrame()
		for !ok {
			flush()
			cli.ReapCompletions()
			addr, ok = cli.AllocFrame()
		}
		n, err := packet.WriteUDP4(cli.Frame(addr), &e.toB, payload)
		if err != nil {
			b.Fatal(err)
		}
		descs[queued] = xsk.Desc{Addr: addr, Len: uint32(n)}
		if queued++; queued == batch {
			flush()
		}
	}
	flush()
	for giveUp := time.Now().Add(roundTripCap); received.Load() < sent && time.Now().Before(giveUp); {
		unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(received.Load())/elapsed.Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(sent-received.Load()), "lost")
	b.ReportMetric(0, "ns/op")
	return float64(received.Load()) * float64(size) / elapsed.Seconds()
}

// --- the echo server in its own process ---
//
// Users run client and server in separate processes, and on this machine
// a second process has cost throughput before, so the xsk echo also runs
// with the server re-executed from this test binary (TestRawEchoChild) in
// namespace B. The parent copies the child's socket descriptor with
// pidfd_getfd to register it in B's program.

const (
	childEnv   = "STARWIRE_RAW_ECHO_CHILD"
	childNSEnv = "STARWIRE_RAW_ECHO_NS"
	childIfEnv = "STARWIRE_RAW_ECHO_IFINDEX"
)

// TestRawEchoChild is the echo server process of BenchmarkRawEcho; it does
// nothing unless started by it.
func TestRawEchoChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		return
	}
	w, _ := strconv.Atoi(os.Getenv(childEnv))
	ifindex, _ := strconv.Atoi(os.Getenv(childIfEnv))
	runtime.LockOSThread() // this thread enters B for good
	h, err := vnetns.GetFromName(os.Getenv(childNSEnv))
	if err != nil {
		t.Fatal(err)
	}
	if err := vnetns.Set(h); err != nil {
		t.Fatal(err)
	}
	s, err := xsk.Open(ifindex, 0, xsk.Config{NumFrames: 1024, Mode: xsk.ModeCopy})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fmt.Printf("ready %d\n", s.FD())
	var stop atomic.Bool
	go func() {
		io.Copy(io.Discard, os.Stdin) // the parent closes stdin to stop us
		stop.Store(true)
	}()
	xskEcho(s, wait(w-1), nil)(&stop)
}

func benchXSKProcess(b *testing.B, e *rawEnv, w wait) echoResult {
	cmd := exec.Command(os.Args[0], "-test.run=^TestRawEchoChild$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childEnv, int(w)+1),
		childNSEnv+"="+e.pair.B.NS, fmt.Sprintf("%s=%d", childIfEnv, e.pair.B.Ifindex))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		e.progB.UnregisterSocket(0)
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()
	ready := make(chan int, 1)
	go func() {
		var fd int
		if _, err := fmt.Fscanf(stdout, "ready %d\n", &fd); err == nil {
			ready <- fd
		}
		io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	var childFD int
	select {
	case childFD = <-ready:
	case err := <-exited:
		exited <- err
		b.Fatalf("echo process exited before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		b.Fatal("echo process not ready")
	}
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		b.Fatal(err)
	}
	fd, err := unix.PidfdGetfd(pidfd, childFD, 0)
	unix.Close(pidfd)
	if err != nil {
		b.Fatal(err)
	}
	err = e.progB.RegisterSocket(0, fd)
	unix.Close(fd) // the map keeps its own reference
	if err != nil {
		b.Fatal(err)
	}

	var cli *xsk.Socket
	err = e.pair.A.Do(func() (err error) {
		cli, err = xsk.Open(e.pair.A.Ifindex, 0, xsk.Config{NumFrames: 1024, Mode: xsk.ModeCopy})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.progA.RegisterSocket(0, cli.FD()); err != nil {
		b.Fatal(err)
	}
	defer func() { e.progA.UnregisterSocket(0); cli.Close() }()
	return driveWith(b, &xskClient{s: cli, hdr: &e.toB, wait: w, poll: xskPoll(cli)}, cmd.Process.Pid)
}

// BenchmarkRawEchoAB compares this module's socket layer with asavie/xdp
// fairly on a machine whose load shifts: each library has its own veth
// pair, and the client alternates between them every 1000 round trips,
// while the server not being measured sleeps in poll(). Run it with
//
//	go test ./afxdp/afxdprpc -run '^$' -bench RawEchoAB -benchtime 400000x
func BenchmarkRawEchoAB(b *testing.B) {
	ex, ea := newRawEnv(b), newRawEnv(b)
	defer ea.closeAsavie()
	for _, w := range waits {
		b.Run(w.name, func(b *testing.B) { benchAB(b, ex, ea, w.mode) })
	}
}

func benchAB(b *testing.B, ex, ea *rawEnv, w wait) {
	const block = 1000
	var active [2]atomic.Bool
	xcli, xsrv := ex.xskSockets(b)
	acli, asrv := ea.asavieSockets(b)
	stopX := serve(b, ex, xskEcho(xsrv, w, &active[0]))
	defer stopX()
	stopA := serve(b, ea, asavieEcho(asrv, w, &active[1]))
	defer stopA()
	clients := [2]pinger{
		&xskClient{s: xcli, hdr: &ex.toB, wait: w, poll: xskPoll(xcli)},
		&asavieClient{s: acli, hdr: &ea.toB, wait: w, poll: asaviePoll(acli)},
	}
	var (
		samples [2][]int64
		spent   [2]time.Duration
		resends [2]int
	)
	for i := range clients {
		active[i].Store(true)
		warmUp(b, clients[i])
		active[i].Store(false)
		samples[i] = make([]int64, 0, maxRTTSamples/2)
	}
	b.ReportAllocs()
	b.SetBytes(2 * 64)
	cur := 0
	active[cur].Store(true)
	var seq uint32
	for i := 0; b.Loop(); i++ {
		if i > 0 && i%block == 0 {
			active[cur].Store(false)
			cur ^= 1
			active[cur].Store(true)
		}
		seq++
		d, r := roundTrip(b, clients[cur], seq)
		spent[cur] += d
		resends[cur] += r
		if len(samples[cur]) < cap(samples[cur]) {
			samples[cur] = append(samples[cur], int64(d))
		}
	}
	for i, name := range []string{"xsk-", "asavie-"} {
		if n := len(samples[i]); n > 0 {
			reportRTT(b, name, float64(n)/spent[i].Seconds(), samples[i])
			b.ReportMetric(float64(resends[i]), name+"resends")
		}
	}
	b.ReportMetric(0, "ns/op")
}
