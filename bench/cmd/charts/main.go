// Command charts draws the charts of a results.json that "starwire bench"
// wrote: for each workload, throughput and p50/p99 latency against size
// and against calls in flight, one line per protocol.
//
//	go run ./bench/cmd/charts bench-results/results.json
//	go run ./bench/cmd/charts -formats png,svg -out DIR results.json
//
// It is a command of its own so that the starwire binary links no
// plotting library.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/starwire/starwire/bench"
	"github.com/starwire/starwire/bench/chart"
)

func main() {
	formats := flag.String("formats", "png", `chart formats: "png", "svg" or both ("png,svg")`)
	out := flag.String("out", "", "directory for the charts (default: the results file's)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: charts [-formats png,svg] [-out DIR] results.json\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *out, *formats); err != nil {
		fmt.Fprintln(os.Stderr, "charts:", err)
		os.Exit(1)
	}
}

func run(results, out, formats string) error {
	f, err := os.Open(results)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := bench.ReadReport(f)
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Dir(results)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var exts []string
	for _, e := range strings.Split(formats, ",") {
		if e = strings.TrimSpace(e); e != "" {
			exts = append(exts, e)
		}
	}
	paths, err := chart.Write(r, out, exts...)
	if err != nil {
		return err
	}
	fmt.Printf("charts: %d files in %s, from %s (%s)\n", len(paths), out, results, r.Date)
	return nil
}
