// Command echoserver serves the bench contenders (starwire, gRPC-Go and the
// raw TCP baseline) in a process of its own, the layout users deploy. It
// prints the addresses it listens on as one line that loadgen's -server
// flag reads, and exits when its standard input closes (so a benchmark that
// started it cannot leave it behind), on SIGINT/SIGTERM, or after
// -lifetime.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/starwire/starwire/bench"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
)

func main() {
	var listen bench.Addrs
	flag.StringVar(&listen.Starwire, "starwire", "127.0.0.1:7471", "starwire listen address")
	flag.StringVar(&listen.GRPC, "grpc", "127.0.0.1:7472", "gRPC-Go listen address")
	flag.StringVar(&listen.Raw, "raw", "127.0.0.1:7473", "raw TCP baseline listen address")
	lifetime := flag.Duration("lifetime", 30*time.Minute, "exit after this long")
	watchStdin := flag.Bool("stdin", false, "exit when standard input reaches end of file")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole life of the process to this file")
	flag.Parse()
	tcp.SetSharedReactors(cluster.CoreNumber()) // SEASTAR_CORE_NUMBER sizes the TCP reactors
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			log.Fatalf("echoserver: %v", err)
		}
		defer stop()
	}

	s, err := bench.StartServers(listen)
	if err != nil {
		log.Fatalf("echoserver: %v", err)
	}
	defer s.Close()
	fmt.Println(s.Addrs)

	done := make(chan string, 3)
	if *watchStdin {
		go func() {
			io.Copy(io.Discard, os.Stdin)
			done <- "standard input closed"
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { done <- (<-sig).String() }()
	go func() {
		time.Sleep(*lifetime)
		done <- "lifetime over"
	}()
	log.Printf("echoserver: exiting: %s", <-done)
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
