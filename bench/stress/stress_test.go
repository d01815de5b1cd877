package stress

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

func TestMain(m *testing.M) {
	Child{}.Main()
	os.Exit(m.Run())
}

func TestPatternFindsEveryChangedByte(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 4096 + 3} {
		b := make([]byte, n)
		Fill(b, 42)
		if err := Check(b, 42); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if n > 0 && Check(b, 43) == nil {
			t.Fatalf("%d bytes pass for another seed", n)
		}
		for i := 0; i < n; i += max(n/5, 1) {
			b[i] ^= 0x10
			if err := Check(b, 42); !errors.Is(err, ErrCorrupted) || !strings.Contains(err.Error(), "byte ") {
				t.Fatalf("byte %d of %d changed: %v", i, n, err)
			}
			b[i] ^= 0x10
		}
	}
}

func TestHostileHeadsParse(t *testing.T) {
	head := ClaimPayload(MethodEcho.ID, 1<<30)
	h, err := wire.ParseHeader(head, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := wire.NewInbound()
	defer in.Release()
	copy(in.Begin(&h), head[wire.HeaderSize:])
	if err := in.ParseDescs(); err != nil || in.Tensors[0].ByteLen() != 1<<30 {
		t.Fatalf("claimed tensor: %v, %+v", err, in.Tensors)
	}
	if h, err := wire.ParseHeader(ClaimMeta(MethodEcho.ID, 64<<20), nil); err != nil || h.MetaLen != 64<<20 {
		t.Fatalf("metadata claim: %+v, %v", h, err)
	}
	frames := GenRequests(3, 5)
	if len(frames) != 3*(wire.HeaderSize+ArgsSize) {
		t.Fatalf("gen requests of %d bytes", len(frames))
	}
	h, err = wire.ParseHeader(frames[2*(wire.HeaderSize+ArgsSize):], nil)
	if err != nil || h.Method != MethodGen.ID || h.CallID != 3 {
		t.Fatalf("third gen request: %+v, %v", h, err)
	}
	if a, err := ParseArgs(frames[2*(wire.HeaderSize+ArgsSize)+wire.HeaderSize:]); err != nil || a != (Args{Seed: 2, N: 5}) {
		t.Fatalf("third gen request asks %+v, %v", a, err)
	}
}

func TestReadMem(t *testing.T) {
	m, err := ReadMem(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.HWM < m.RSS {
		t.Fatalf("%+v", m)
	}
	if _, err := ReadMem(-1); err == nil {
		t.Fatal("memory of pid -1")
	}
}

// The workload against a server in this process: every kind of call is
// answered and verified, and cancelled calls are counted as such.
func TestWorkloadVerifiesEveryOp(t *testing.T) {
	s := NewServer()
	l, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	defer s.Close()
	c := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: &tcp.Transport{}})
	defer c.Close()
	var seen [numOps]atomic.Int64
	w := Workload{Name: "all ops", Callers: 4, MinSize: 1, MaxSize: 256 << 10,
		Ops: []Op{OpEcho, OpEchoInline, OpGen, OpSleep}, SleepMax: time.Millisecond,
		Duration: 300 * time.Millisecond, Seed: 7, OnCall: func(r *Record) { seen[r.Op].Add(1) }}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := w.Run(ctx, c)
	t.Log("\n" + r.String())
	if r.Hung > 0 || r.Corrupted > 0 || r.Failed() > 0 || r.OK == 0 || r.OK != r.Calls || r.BytesVerified == 0 {
		t.Fatalf("report:\n%s", r)
	}
	for op := range seen {
		if seen[op].Load() == 0 {
			t.Errorf("no %v call", Op(op))
		}
	}
	w.Ops, w.Cancel, w.SleepMax, w.Deadline, w.OnCall = []Op{OpSleep}, 1, time.Minute, 200*time.Millisecond, nil
	r = w.Run(ctx, c)
	if r.Cancelled != r.Calls || r.Codes[wire.Cancelled] == 0 || r.Corrupted > 0 {
		t.Fatalf("cancelled run:\n%s", r)
	}
	// A cancellation drawn close to the deadline may come after it.
	if ps := r.Problems(w, time.Second, wire.Cancelled, wire.DeadlineExceeded); len(ps) != 1 || !strings.Contains(ps[0], "answered") {
		t.Fatalf("problems of a run whose calls were all cancelled: %q", ps)
	}
}

// A child server process: it prints its address, serves, reports its
// memory and heap, dumps its goroutines on SIGQUIT, and exits when asked.
func TestChildProcess(t *testing.T) {
	cmd, err := Command("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if m, err := p.Mem(); err != nil || m.RSS == 0 {
		t.Fatalf("child memory %+v, %v", m, err)
	}
	if err := ResetHWM(p.Pid()); err != nil {
		t.Fatal(err)
	}
	c := rpc.NewClient(p.Addr, rpc.ClientOptions{Transport: &tcp.Transport{}})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var reply rpc.Reply
	req := rpc.Request{Meta: Args{Seed: 9, N: 1 << 20}.Append(nil)}
	if err := c.Call(ctx, MethodGen, &req, &reply); err != nil {
		t.Fatal(err)
	}
	if err := Check(reply.Tensors[0].Data, 9); err != nil {
		t.Fatal(err)
	}
	reply.Release()
	if now, peak, err := Heap(ctx, c); err != nil || now <= 0 || peak < now {
		t.Fatalf("heap %d, peak %d: %v", now, peak, err)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if dump := p.Dump(); !strings.Contains(dump, "goroutine ") {
		t.Fatalf("no goroutines in the dump:\n%s", dump)
	}
	if !p.Exited() {
		t.Fatal("child alive after its dump")
	}
	cmd, _ = Command("127.0.0.1:0")
	if p, err = Start(cmd, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
