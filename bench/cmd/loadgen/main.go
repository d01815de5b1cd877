// Command loadgen puts the same load on starwire, gRPC-Go and the raw TCP
// baseline, taking turns (-rounds), and prints one comparison table. For
// example:
//
//	go run ./bench/cmd/loadgen -inflight 32 -size 64 -duration 3s
//
// With -server embedded (the default) the servers run in this process;
// otherwise -server lists the addresses that echoserver printed, as
// "starwire=HOST:PORT,grpc=HOST:PORT,raw=HOST:PORT" (any subset).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/starwire/starwire/bench"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
)

func main() {
	cfg := bench.DefaultLoad
	flag.StringVar(&cfg.Mode, "mode", cfg.Mode, "echo (send -size bytes, get them back) or fetch (ask for -size bytes, RecvTensor-shaped)")
	flag.IntVar(&cfg.Size, "size", cfg.Size, "payload bytes per call")
	flag.IntVar(&cfg.Inflight, "inflight", cfg.Inflight, "calls in flight at once")
	flag.Int64Var(&cfg.Calls, "calls", 0, "stop each contender after this many calls (0: only -duration)")
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measuring time per contender")
	flag.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured calls per contender first")
	flag.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "turns the contenders take, each -duration/-rounds long")
	flag.DurationVar(&cfg.CallTimeout, "call_timeout", 0, "give each starwire and gRPC-Go call a context of its own with this timeout (0: none)")
	server := flag.String("server", "embedded", `"embedded", or the addresses echoserver printed`)
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	cancellable := flag.Bool("cancellable", false, "calls carry a context that can be cancelled (one for the whole run, as a training step's calls share one), instead of context.Background()")
	flag.Parse()
	tcp.SetSharedReactors(cluster.CoreNumber()) // SEASTAR_CORE_NUMBER sizes the TCP reactors
	err := profiled(*cpuProfile, func() error { return run(*server, cfg, *cancellable) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(server string, cfg bench.LoadConfig, cancellable bool) error {
	ctx := context.Background()
	if cancellable {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		fmt.Println("calls carry a context that can be cancelled")
	}
	var addrs bench.Addrs
	if server == "embedded" {
		s, err := bench.StartServers(bench.Loopback)
		if err != nil {
			return err
		}
		defer s.Close()
		addrs = s.Addrs
	} else {
		var err error
		if addrs, err = bench.ParseAddrs(server); err != nil {
			return err
		}
	}
	rs := bench.RunLoad(ctx, addrs, cfg)
	if err := bench.FormatTable(os.Stdout, cfg, rs); err != nil {
		return err
	}
	if err := bench.FormatTurns(os.Stdout, rs); err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%s: %w", r.Name, r.Err)
		}
	}
	return nil
}

// profiled runs f, writing a CPU profile of it to path unless path is empty.
func profiled(path string, f func() error) error {
	if path == "" {
		return f()
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := pprof.StartCPUProfile(out); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	return f()
}
