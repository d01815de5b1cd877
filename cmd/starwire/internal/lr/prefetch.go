package lr

import (
	"context"

	"github.com/starwire/starwire/cmd/starwire/internal/clicks"
	"github.com/starwire/starwire/handlers/compute"
)

// A prefetcher makes a stream's batches on a goroutine of its own, one
// step ahead of the steps that use them, as tf.data's prefetch does: the
// next batch is drawn while this step's calls are on the wire, so that
// drawing examples is off the step's critical path. The batches and their
// order are those of the stream's Fill, so that a run trains on the same
// examples with or without it.
//
// Drawing a batch takes longer than most of what a step does between two
// waits, and while it runs on a thread the goroutines woken there (the
// step's handlers, a caller answered) wait behind it: it yields every
// fillChunk examples, so that it takes the time the step leaves idle
// rather than delaying the step. It draws holding a token of the compute
// limit, given back at each pause and while it waits for a free batch.
type prefetcher struct {
	full chan *clicks.Batch
	free chan *clicks.Batch
	stop chan struct{}
	done chan struct{}
}

// prefetchDepth is how many batches may be drawn ahead of the step.
const prefetchDepth = 2

// prefetch starts drawing n batches of size examples from stream, bounded
// by limit (nil: no bound).
func prefetch(stream *clicks.Stream, size, n int, limit *compute.Limit) *prefetcher {
	p := &prefetcher{
		full: make(chan *clicks.Batch, prefetchDepth),
		free: make(chan *clicks.Batch, prefetchDepth+1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for range prefetchDepth + 1 {
		p.free <- new(clicks.Batch)
	}
	go func() {
		defer close(p.done)
		for range n {
			var b *clicks.Batch
			select {
			case b = <-p.free:
			case <-p.stop:
				return
			}
			limit.Acquire()
			stream.FillPausing(b, size, fillChunk, limit.Yield)
			limit.Release()
			select {
			case p.full <- b:
			case <-p.stop:
				return
			}
		}
	}()
	return p
}

// next returns the next batch, to be handed back with recycle once the
// step is done with it.
func (p *prefetcher) next(ctx context.Context) (*clicks.Batch, error) {
	select {
	case b := <-p.full:
		return b, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func (p *prefetcher) recycle(b *clicks.Batch) { p.free <- b }

// close stops drawing and waits for the goroutine to end.
func (p *prefetcher) close() {
	close(p.stop)
	<-p.done
}

// fillChunk is how many examples the prefetcher draws between two yields:
// a few microseconds' work.
const fillChunk = 32
