package staleness

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// peer is one side's connection to the parameter server.
type peer interface {
	push(ctx context.Context, version uint64, blob []byte) error
	// pull fetches the newest version; when it is newer than have, its blob
	// lands in dst and fresh is true.
	pull(ctx context.Context, have uint64, dst []byte) (version uint64, fresh bool, err error)
	// wait is pull answered only once a version newer than have is there
	// (push mode's standing call).
	wait(ctx context.Context, have uint64, dst []byte) (version uint64, fresh bool, err error)
	close()
}

// Run runs the benchmark over protocol (ProtocolStarwire, ProtocolAFXDP,
// ProtocolGRPC or ProtocolFilesystem) in cfg.Mode for cfg.Duration, or
// until ctx ends.
func Run(ctx context.Context, protocol string, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if protocol == ProtocolFilesystem && cfg.mode() == ModePush {
		return nil, fmt.Errorf("%w: a directory cannot push: the filesystem protocol runs in pull mode only", ErrConfig)
	}
	st := &store{}
	defer st.close()
	maxMsg := cfg.DataSize + 1024
	var (
		addr string
		stop func()
		dial func() (peer, error)
		err  error
	)
	switch protocol {
	case ProtocolStarwire:
		addr, stop, err = startStarwire(st)
		dial = func() (peer, error) { return dialStarwire(addr, nil), nil }
	case ProtocolAFXDP:
		var x *xdpFabric
		if x, err = startAFXDP(st, cfg.Workers+1); err == nil {
			stop = x.close
			next := 0
			dial = func() (peer, error) {
				p := x.peers[next]
				next++
				return dialStarwire(p.addr, p.tr), nil
			}
		}
	case ProtocolGRPC:
		addr, stop, err = startGRPC(st, maxMsg)
		dial = func() (peer, error) { return dialGRPC(addr, maxMsg) }
	case ProtocolFilesystem:
		dir := cfg.Dir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "starwire-staleness"); err != nil {
				return nil, fmt.Errorf("staleness: filesystem: %w", err)
			}
			stop = func() { os.RemoveAll(dir) }
		} else {
			stop = func() {}
		}
		dial = func() (peer, error) { return fsPeer{dir}, nil }
	default:
		return nil, fmt.Errorf("%w: protocol %q, want %q, %q, %q or %q", ErrConfig, protocol, ProtocolStarwire, ProtocolAFXDP, ProtocolGRPC, ProtocolFilesystem)
	}
	if err != nil {
		return nil, err
	}
	defer stop()
	// Before stop: wakes push mode's waiting handlers, which the server
	// waits for as it stops.
	defer st.close()

	// One connection per pseudo process: the trainer and every worker.
	peers := make([]peer, cfg.Workers+1)
	for i := range peers {
		if peers[i], err = dial(); err != nil {
			for _, p := range peers[:i] {
				p.close()
			}
			return nil, err
		}
	}
	defer func() {
		for _, p := range peers {
			p.close()
		}
	}()

	cfg.Mode = cfg.mode()
	r := &run{cfg: cfg, st: st, res: &Result{Protocol: protocol, Config: cfg}}
	// The run ends by cancellation rather than a deadline: a call's own
	// deadline timer could fire a moment before the context reports it,
	// and the run would take its end for a failure.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return r.do(ctx, cancel, peers[0], peers[1:])
}

// run is one benchmark's shared state.
type run struct {
	cfg     Config
	st      *store        // push mode: where the trainer puts each version for the waiting workers
	current atomic.Uint64 // the trainer's newest version, counted from the start of its push
	// madeAt holds, by version mod its length, when push mode's trainer
	// made each version (UnixNano): a worker's delivery time is from then.
	madeAt  [1024]atomic.Int64
	res     *Result
	mu      sync.Mutex
	firstEr error
}

func (r *run) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return // a call cut short by the end of the run is not a failure
	}
	r.mu.Lock()
	if r.firstEr == nil {
		r.firstEr = err
	}
	r.mu.Unlock()
}

// do runs the trainer and the workers until cfg.Duration has passed, then
// calls stop.
func (r *run) do(ctx context.Context, stop func(), trainer peer, workers []peer) (*Result, error) {
	blob := make([]byte, r.cfg.DataSize)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(blob); i += 8 {
		binary.LittleEndian.PutUint64(blob[i:], rng.Uint64())
	}
	start := time.Now()
	stopAt := time.AfterFunc(r.cfg.Duration, stop)
	defer stopAt.Stop()
	// The first version is in place before the workers start, so every
	// sample measures lag behind a running trainer.
	if err := r.push(ctx, trainer, blob); err != nil {
		return nil, fmt.Errorf("staleness: first push over %s: %w", r.res.Protocol, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.cfg.PushEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := r.push(ctx, trainer, blob); err != nil {
				r.fail(ctx, fmt.Errorf("staleness: push over %s: %w", r.res.Protocol, err))
				return
			}
		}
	}()
	stats := make([]workerStats, len(workers))
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx, w, &stats[i])
		}()
	}
	wg.Wait()
	r.res.Elapsed = time.Since(start)
	if r.firstEr != nil {
		return nil, r.firstEr
	}
	r.res.Versions = r.current.Load()
	for i := range stats {
		r.res.addWorker(&stats[i])
	}
	return r.res, nil
}

// push publishes the next version, stamped in the blob's first bytes.
func (r *run) push(ctx context.Context, p peer, blob []byte) error {
	if r.cfg.Mode == ModePush {
		r.make(blob)
		return nil
	}
	v := r.current.Add(1)
	binary.LittleEndian.PutUint64(blob, v)
	t0 := time.Now()
	if err := p.push(ctx, v, blob); err != nil {
		return err
	}
	r.res.Push.add(time.Since(t0))
	return nil
}

// make is push mode's trainer making a version: in memory of its own (a
// copy of blob, stamped), which every worker waiting for it is then
// answered from. Pushing is the answers' sending; each worker times its
// delivery, from here to the version in its memory.
func (r *run) make(blob []byte) {
	data := make([]byte, len(blob))
	copy(data, blob)
	v := r.current.Add(1)
	binary.LittleEndian.PutUint64(data, v)
	r.madeAt[v%uint64(len(r.madeAt))].Store(time.Now().UnixNano())
	r.st.put(v, data, nil)
}

// workerStats is what one worker records; only its goroutines touch it
// until the run ends.
type workerStats struct {
	pull      timings
	empty     int // pulls that found nothing newer
	samples   int
	staleSum  uint64
	staleMax  uint64
	stale     [maxLag + 1]int // samples by versions behind, the last bucket maxLag and more
	corrupted int
}

// maxLag is the largest staleness counted apart; more counts as maxLag.
const maxLag = 1023

// work pulls every PullEvery and samples staleness every StepEvery until ctx
// ends.
func (r *run) work(ctx context.Context, p peer, s *workerStats) {
	dst := make([]byte, r.cfg.DataSize)
	var held atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.cfg.StepEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			lag := r.current.Load() - held.Load()
			s.samples++
			s.staleSum += lag
			s.staleMax = max(s.staleMax, lag)
			s.stale[min(lag, maxLag)]++
		}
	}()
	defer func() { <-done }()
	if r.cfg.Mode == ModePush {
		r.listen(ctx, p, s, dst, &held)
		return
	}
	t := time.NewTicker(r.cfg.PullEvery)
	defer t.Stop()
	for {
		t0 := time.Now()
		v, fresh, err := p.pull(ctx, held.Load(), dst)
		if err != nil {
			r.fail(ctx, fmt.Errorf("staleness: pull over %s: %w", r.res.Protocol, err))
			return
		}
		if fresh {
			s.pull.add(time.Since(t0))
			if len(dst) >= 8 && binary.LittleEndian.Uint64(dst) != v {
				s.corrupted++
			}
			held.Store(v)
		} else {
			s.empty++
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// listen is a push-mode worker: it holds one call waiting for the next
// version at a time, and polls nothing.
func (r *run) listen(ctx context.Context, p peer, s *workerStats, dst []byte, held *atomic.Uint64) {
	for {
		v, fresh, err := p.wait(ctx, held.Load(), dst)
		if err != nil {
			r.fail(ctx, fmt.Errorf("staleness: wait over %s: %w", r.res.Protocol, err))
			return
		}
		if !fresh {
			continue
		}
		if made := r.madeAt[v%uint64(len(r.madeAt))].Load(); made != 0 {
			s.pull.add(time.Since(time.Unix(0, made)))
		}
		if len(dst) >= 8 && binary.LittleEndian.Uint64(dst) != v {
			s.corrupted++
		}
		held.Store(v)
	}
}
