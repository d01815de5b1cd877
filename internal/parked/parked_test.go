package parked

import (
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/internal/testwait"
)

// TestMain fails the package when a goroutine outlives the tests.
func TestMain(m *testing.M) { testwait.VerifyTestMain(m) }

func runFunc(f func()) { f() }

// goroutineID returns the running goroutine's number, from the first line
// of its stack ("goroutine 7 [running]:"), so that a test can tell which
// goroutine ran a job.
func goroutineID() string {
	b := make([]byte, 64)
	return strings.Fields(string(b[:runtime.Stack(b, false)]))[1]
}

// TestReusedAndEnd: a job after another runs on the goroutine the first
// left parked, not on a new one, and a parked goroutine ends once Idle has
// passed without a job. Idle is the subject, so the test runs on
// synctest's clock; synctest.Wait lets the pool's goroutines settle before
// each look, and the bubble, which waits for its goroutines, fails the
// test if one never ends.
func TestReusedAndEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 20 * time.Millisecond
		p := &Pool[func()]{Run: runFunc, Max: 4, Idle: idle}
		var first string
		for i := range 20 {
			done := make(chan string)
			p.Go(func() { done <- goroutineID() })
			id := <-done
			if i == 0 {
				first = id
			} else if id != first {
				t.Fatalf("job %d ran on goroutine %s, the first on %s: the parked one was not reused", i, id, first)
			}
			synctest.Wait()
			if n := p.Parked(); n != 1 {
				t.Fatalf("%d parked after job %d, want 1", n, i)
			}
			time.Sleep(idle / 2) // less than Idle between jobs: the goroutine stays
		}
		time.Sleep(idle) // synctest's clock: Idle passes without a job
		synctest.Wait()
		if n := p.Parked(); n != 0 {
			t.Fatalf("%d parked after Idle without a job, want 0", n)
		}
	})
}

// TestMaxAndClose: after a burst, at most Max goroutines stay parked,
// without Idle until Close, which ends them; a job after Close still runs
// and its goroutine ends.
func TestMaxAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Pool[func()]{Run: runFunc, Max: 3}
		release := make(chan struct{})
		started := make(chan struct{})
		for range 8 {
			p.Go(func() { started <- struct{}{}; <-release })
		}
		for range 8 {
			<-started
		}
		close(release)
		synctest.Wait()
		if n := p.Parked(); n != 3 {
			t.Fatalf("%d parked after a burst of 8, want Max (3)", n)
		}
		time.Sleep(time.Hour) // no Idle: they stay
		synctest.Wait()
		if n := p.Parked(); n != 3 {
			t.Fatalf("%d parked an hour later, want 3", n)
		}
		p.Close()
		synctest.Wait()
		if n := p.Parked(); n != 0 {
			t.Fatalf("%d parked after Close, want 0", n)
		}
		ran := make(chan struct{})
		p.Go(func() { close(ran) })
		<-ran
		synctest.Wait()
		if n := p.Parked(); n != 0 {
			t.Fatalf("%d parked after a job after Close, want 0", n)
		}
	})
}
