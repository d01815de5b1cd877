package stress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// ErrCorrupted is wrapped by the error of a call whose answer differs from
// what was asked for.
var ErrCorrupted = errors.New("stress: corrupted answer")

// An Op is a kind of call a Workload makes.
type Op uint8

// Ops.
const (
	OpEcho       Op = iota // a tensor both ways, handled on a goroutine
	OpEchoInline           // a tensor both ways, handled inline
	OpGen                  // a small request, a tensor back
	OpSleep                // a call the server holds for a while
	numOps
)

var opNames = [numOps]string{"echo", "echo-inline", "gen", "sleep"}

func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Method returns the server method o calls.
func (o Op) Method() rpc.Method {
	switch o {
	case OpEchoInline:
		return MethodEchoInline
	case OpGen:
		return MethodGen
	case OpSleep:
		return MethodSleep
	}
	return MethodEcho
}

// A Workload is a set of callers sharing one rpc.Client, each making one
// call after another until Duration has passed. Every answer is checked
// byte for byte against the pattern of its call's seed.
type Workload struct {
	Name    string
	Callers int
	// MinSize and MaxSize bound each call's tensor, in bytes; sizes are
	// drawn log-uniformly, so small and large tensors are both common.
	MinSize, MaxSize int
	// Ops are the kinds of call, drawn uniformly; empty means OpEcho.
	Ops []Op
	// Deadline is a call's deadline; zero means 10s.
	Deadline time.Duration
	// Short is the fraction of calls whose deadline is instead drawn
	// uniformly from [ShortMin, ShortMax), so that deadlines pass while
	// calls are queued, half sent or half answered.
	Short              float64
	ShortMin, ShortMax time.Duration
	// Cancel is the fraction of calls cancelled at a random moment before
	// their deadline.
	Cancel float64
	// SleepMax bounds what an OpSleep call asks the server to wait.
	SleepMax time.Duration
	// Duration is how long callers keep starting calls.
	Duration time.Duration
	// Calls, when positive, is instead how many calls each caller makes:
	// a fixed amount of work, for comparing what two transports need to
	// do the same.
	Calls int
	// Seed makes the run's sizes, ops and data reproducible.
	Seed uint64
	// OnCall, when set, is called with every call's record, from the
	// callers' goroutines.
	OnCall func(*Record)
}

// A Record is what one call did.
type Record struct {
	Caller    int
	Op        Op
	Size      int // tensor bytes asked for
	Code      wire.Code
	Err       error // nil when the answer was verified
	Verified  int64 // answer bytes verified
	Start     time.Time
	Latency   time.Duration
	Deadline  time.Duration // the call's own deadline, from Start
	Overrun   time.Duration // how long after its deadline the call returned, if it did
	Cancelled bool          // the workload cancelled the call
}

// sampleRoom bounds the latency samples each caller keeps.
const sampleRoom = 1 << 15

// Run runs w on c and returns its report. It returns when every caller has
// finished, or when ctx ends first: calls still in flight then are counted
// as hung, and their callers stop after those calls return.
func (w Workload) Run(ctx context.Context, c *rpc.Client) *Report {
	w.defaults()
	// The server's lateness is measured from here (the first call starts
	// it, or resets it); a server without MethodLate leaves it zero.
	_, lateErr := Late(ctx, c)
	start := time.Now()
	callers := make([]*caller, w.Callers)
	// Filling and checking data is the harness's own CPU work; with every
	// processor busy at it, a caller whose answer arrived would wait its
	// turn behind the others and return late for no fault of the code
	// under test. One processor is left free.
	cpu := make(chan struct{}, max(runtime.GOMAXPROCS(0)-1, 1))
	var wg sync.WaitGroup
	for i := range callers {
		cl := &caller{w: &w, c: c, cpu: cpu, idx: i, rng: rand.New(rand.NewPCG(w.Seed, uint64(i)+1))}
		callers[i] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl.run(start.Add(w.Duration))
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	late := make(chan time.Duration, 1)
	go func() {
		var worst time.Duration
		schedLate(func(d time.Duration) { worst = max(worst, d) }, done, ctx.Done())
		late <- worst
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	r := &Report{Name: w.Name, Elapsed: time.Since(start), Codes: make(map[wire.Code]int64), SchedLate: <-late}
	now := time.Now()
	var lat []time.Duration
	for _, cl := range callers {
		cl.mu.Lock()
		cl.stop = true
		r.add(&cl.stats)
		lat = append(lat, cl.stats.lat...)
		if !cl.inCall.IsZero() {
			r.Hung++
			r.OldestHung = max(r.OldestHung, now.Sub(cl.inCall))
		}
		cl.mu.Unlock()
	}
	r.setLatency(lat)
	if lateErr == nil {
		lctx, cancel := context.WithTimeout(context.Background(), lateAsk)
		r.ServerLate, _ = Late(lctx, c)
		cancel()
	}
	return r
}

// lateAsk bounds the question for the server's lateness after a run, whose
// own context may have ended.
const lateAsk = 5 * time.Second

// schedTick is the sleep whose overshoot schedLate measures.
const schedTick = time.Millisecond

// schedLate calls seen with how late a goroutine of this process, asleep
// for schedTick, woke past its time, until done or stop closes (either may
// be nil): how late the machine let any goroutine run, which no transport
// can do better than.
func schedLate(seen func(time.Duration), done, stop <-chan struct{}) {
	t := time.NewTimer(schedTick)
	defer t.Stop()
	for {
		at := time.Now()
		t.Reset(schedTick)
		select {
		case <-done:
			return
		case <-stop:
			return
		case <-t.C:
			seen(time.Since(at) - schedTick)
		}
	}
}

func (w *Workload) defaults() {
	w.Callers = max(w.Callers, 1)
	w.MinSize = max(w.MinSize, 1)
	w.MaxSize = max(w.MaxSize, w.MinSize)
	if len(w.Ops) == 0 {
		w.Ops = []Op{OpEcho}
	}
	if w.Deadline <= 0 {
		w.Deadline = 10 * time.Second
	}
	if w.ShortMax <= w.ShortMin {
		w.ShortMax = w.ShortMin + time.Millisecond
	}
}

// caller is one goroutine of a Workload.
type caller struct {
	w     *Workload
	c     *rpc.Client
	cpu   chan struct{} // a token while filling or checking data
	idx   int
	rng   *rand.Rand
	buf   []byte
	meta  []byte
	req   rpc.Request
	reply rpc.Reply

	mu    sync.Mutex
	stats stats
	// When the call in flight started; zero between calls and while the
	// caller fills or checks its data, which is the harness's own work
	// (and waits for a processor, see Run), not the code under test's.
	inCall time.Time
	stop   bool
}

func (cl *caller) run(until time.Time) {
	for n := 0; cl.more(n, until); n++ {
		cl.mu.Lock()
		stop := cl.stop
		cl.mu.Unlock()
		if stop {
			return
		}
		rec := cl.call()
		cl.mu.Lock()
		cl.stats.record(&rec, cl.rng)
		cl.mu.Unlock()
		if cl.w.OnCall != nil {
			cl.w.OnCall(&rec)
		}
	}
}

// more reports whether the caller, having made n calls, makes another.
func (cl *caller) more(n int, until time.Time) bool {
	if cl.w.Calls > 0 {
		return n < cl.w.Calls
	}
	return time.Now().Before(until)
}

// calling records when the call in flight started, or zero once it
// returned.
func (cl *caller) calling(since time.Time) {
	cl.mu.Lock()
	cl.inCall = since
	cl.mu.Unlock()
}

// size draws a tensor size log-uniformly from [MinSize, MaxSize].
func (cl *caller) size() int {
	lo, hi := math.Log(float64(cl.w.MinSize)), math.Log(float64(cl.w.MaxSize)+1)
	return min(int(math.Exp(lo+cl.rng.Float64()*(hi-lo))), cl.w.MaxSize)
}

func (cl *caller) call() Record {
	w := cl.w
	rec := Record{Caller: cl.idx, Op: w.Ops[cl.rng.IntN(len(w.Ops))], Size: cl.size(), Deadline: w.Deadline}
	seed := cl.rng.Uint64()
	args := Args{Seed: seed}
	cl.req.Tensors = nil
	switch rec.Op {
	case OpEcho, OpEchoInline:
		if len(cl.buf) < rec.Size {
			cl.buf = make([]byte, w.MaxSize)
		}
		data := cl.buf[:rec.Size]
		cl.cpu <- struct{}{}
		Fill(data, seed)
		<-cl.cpu
		cl.req.Tensors = []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(rec.Size)}, Data: data}}
	case OpGen:
		args.N = uint64(rec.Size)
	case OpSleep:
		rec.Size = 0
		if w.SleepMax > 0 {
			args.N = uint64(cl.rng.Int64N(int64(w.SleepMax)))
		}
	}
	cl.meta = args.Append(cl.meta[:0])
	cl.req.Meta = cl.meta
	if w.Short > 0 && cl.rng.Float64() < w.Short {
		rec.Deadline = w.ShortMin + time.Duration(cl.rng.Int64N(int64(w.ShortMax-w.ShortMin)))
	}
	rec.Start = time.Now()
	cl.calling(rec.Start)
	deadline := rec.Start.Add(rec.Deadline)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	if w.Cancel > 0 && cl.rng.Float64() < w.Cancel {
		rec.Cancelled = true
		t := time.AfterFunc(time.Duration(cl.rng.Int64N(int64(rec.Deadline))), cancel)
		defer t.Stop()
	}
	err := cl.c.Call(ctx, rec.Op.Method(), &cl.req, &cl.reply)
	end := time.Now()
	cl.calling(time.Time{})
	cancel()
	rec.Latency = end.Sub(rec.Start)
	if end.After(deadline) {
		rec.Overrun = end.Sub(deadline)
	}
	rec.Code = rpc.CodeOf(err)
	if err != nil {
		rec.Err = err
		// The transport may still read a request whose call gave up;
		// the next call gets fresh memory rather than change it.
		cl.buf = nil
		return rec
	}
	cl.cpu <- struct{}{}
	rec.Verified, rec.Err = cl.verify(rec.Op, rec.Size, seed)
	<-cl.cpu
	cl.reply.Release()
	return rec
}

// verify checks the reply of a call of op with the given size and seed.
func (cl *caller) verify(op Op, size int, seed uint64) (int64, error) {
	r := &cl.reply
	if !bytes.Equal(r.Meta, cl.meta) {
		return 0, fmt.Errorf("stress: %v answered metadata %x, want %x: %w", op, r.Meta, cl.meta, ErrCorrupted)
	}
	want := 1
	if op == OpSleep {
		want = 0
	}
	if len(r.Tensors) != want {
		return 0, fmt.Errorf("stress: %v answered %d tensors, want %d: %w", op, len(r.Tensors), want, ErrCorrupted)
	}
	if want == 0 {
		return int64(len(r.Meta)), nil
	}
	t := &r.Tensors[0]
	if t.DType != wire.DTUint8 || len(t.Data) != size {
		return 0, fmt.Errorf("stress: %v answered %v of %d bytes, want %d: %w", op, t.DType, len(t.Data), size, ErrCorrupted)
	}
	if err := Check(t.Data, seed); err != nil {
		return 0, fmt.Errorf("stress: %v of %d bytes: %w", op, size, err)
	}
	return int64(len(r.Meta) + size), nil
}
