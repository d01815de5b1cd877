package main

import (
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers/compute"
)

func TestSpareProc(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      string // "" leaves GOMAXPROCS unset
		spinning int    // the tasks' AF_XDP reactors that busy-poll
		delta    int
		say      string
	}{
		{name: "unset", delta: 1, say: "one spare for the tasks' network goroutines;"},
		{name: "unset, AF_XDP polling adaptively", delta: 1, say: "one spare for the tasks' network goroutines;"},
		{name: "unset, AF_XDP, one reactor spinning", spinning: 1, delta: 2, say: "1 for their spinning AF_XDP reactors"},
		{name: "unset, AF_XDP, two reactors spinning", spinning: 2, delta: 3, say: "2 for their spinning AF_XDP reactors"},
		{name: "set by the user", env: "2", delta: 0, say: "as the environment sets it"},
		{name: "set by the user, AF_XDP", env: "2", spinning: 1, delta: 0, say: "as the environment sets it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, had := os.LookupEnv("GOMAXPROCS")
			t.Cleanup(func() {
				if had {
					os.Setenv("GOMAXPROCS", old)
				} else {
					os.Unsetenv("GOMAXPROCS")
				}
			})
			if tc.env == "" {
				os.Unsetenv("GOMAXPROCS")
			} else {
				os.Setenv("GOMAXPROCS", tc.env)
			}
			before := runtime.GOMAXPROCS(0)
			p, restore := addSpareProc()
			p.addReactorProcs(tc.spinning)
			p.addReactorProcs(tc.spinning) // the first call only counts
			if got := runtime.GOMAXPROCS(0); got != before+tc.delta || p.After != got || p.Before != before {
				t.Errorf("GOMAXPROCS %d → %d, reported %d → %d; want %d → %d", before, got, p.Before, p.After, before, before+tc.delta)
			}
			if !strings.Contains(p.String(), tc.say) {
				t.Errorf("String() = %q, want it to say %q", p, tc.say)
			}
			restore()
			if got := runtime.GOMAXPROCS(0); got != before {
				t.Errorf("after restore GOMAXPROCS %d, want %d", got, before)
			}
		})
	}
}

// BenchmarkRoundTripBesideKernels times a 64-byte loopback round trip
// while goroutines run op-kernel-like work (150µs runs that yield between
// them): why the local cluster takes a spare P and bounds its computing
// goroutines by its CPUs (package compute). Whenever as many goroutines
// compute as there are Ps, the round trip waits for the runtime's monitor
// to poll the network (about every 10 ms): with one kernel per CPU and no
// spare P, and with a spare P and a kernel more, unless the kernels take
// tokens of a compute.Limit of one per CPU.
func BenchmarkRoundTripBesideKernels(b *testing.B) {
	cpus := runtime.GOMAXPROCS(0)
	for _, bc := range []struct {
		name           string
		procs, kernels int
		bound          *compute.Limit
	}{
		{"procs=cpus", cpus, cpus, nil},
		{"procs=cpus+1", cpus + 1, cpus, nil},
		{"procs=cpus+1/kernels=cpus+1", cpus + 1, cpus + 1, nil},
		{"procs=cpus+1/kernels=cpus+1/bound=cpus", cpus + 1, cpus + 1, compute.New(cpus)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(bc.procs))
			client, stop := echoBesideKernels(b, bc.kernels, bc.bound)
			defer stop()
			buf := make([]byte, 64)
			b.SetBytes(int64(2 * len(buf)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := client.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(client, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// echoBesideKernels starts a loopback echo and kernels goroutines that
// compute, each holding a token of bound while it does, until stop is
// called.
func echoBesideKernels(b *testing.B, kernels int, bound *compute.Limit) (net.Conn, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	for range kernels {
		wg.Go(func() {
			bound.Acquire()
			defer bound.Release()
			for !done.Load() {
				spin(150 * time.Microsecond)
				bound.Yield()
			}
		})
	}
	return client, func() {
		done.Store(true)
		wg.Wait()
		client.Close()
		ln.Close()
	}
}

var spun atomic.Uint64

// spin computes for about d without blocking.
func spin(d time.Duration) {
	x := uint64(1)
	for end := time.Now().Add(d); time.Now().Before(end); {
		for range 256 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	spun.Add(x)
}
