package lr

import (
	"context"
	"testing"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/clicks"
	"github.com/starwire/starwire/handlers/compute"
	"github.com/starwire/starwire/internal/testwait"
)

// TestPrefetchTakesComputeToken: the prefetcher draws only holding a token
// of its limit, and holds none once it has handed its batch over.
func TestPrefetchTakesComputeToken(t *testing.T) {
	gen, err := clicks.New(clicks.DefaultConfig(1000, 1))
	if err != nil {
		t.Fatal(err)
	}
	limit := compute.New(1)
	limit.Acquire()
	p := prefetch(gen.Stream(1), 4*fillChunk, 1, limit)
	defer p.close()
	testwait.Eventually(t, 5*time.Second, func() bool { return limit.Waiting() == 1 }, "the prefetcher to wait for the token")
	select {
	case <-p.full:
		t.Fatal("a batch was drawn while the only token was held elsewhere")
	default:
	}
	limit.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := p.next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != 4*fillChunk {
		t.Fatalf("batch of %d examples, want %d", b.Len(), 4*fillChunk)
	}
	if h := limit.Held(); h != 0 {
		t.Fatalf("%d tokens held once the batch was handed over", h)
	}
}
