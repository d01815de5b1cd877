package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/cmd/starwire/internal/staleness"
)

// stalenessCmd runs the parameter-serving staleness benchmark over each
// requested protocol in turn.
func stalenessCmd(ctx context.Context, args []string, stdout io.Writer) error {
	def := staleness.DefaultConfig()
	fs := flag.NewFlagSet("staleness", flag.ContinueOnError)
	dataMB := fs.Float64("data_size", float64(def.DataSize)/(1<<20), "parameter blob size in MB")
	push := fs.Float64("push_frequency", def.PushEvery.Seconds(), "seconds between the trainer's pushes")
	pull := fs.Float64("pull_frequency", def.PullEvery.Seconds(), "seconds between each worker's pulls")
	step := fs.Float64("step_frequency", def.StepEvery.Seconds(), "seconds between each worker's staleness samples")
	workersList := fs.String("workers", strconv.Itoa(def.Workers), "pseudo workers; a comma-separated `list` (4,16,64) runs each count")
	duration := fs.Duration("duration", def.Duration, "how long each protocol runs")
	protocol := fs.String("protocol", "all", `"starwire" (TCP), "afxdp" (root; namespaces and veth pairs), "grpc", "filesystem" (the benchmark's baseline: versions written to a directory, pull mode only), a comma-separated list of them, or "all"`)
	modeList := fs.String("mode", staleness.ModePull, `how versions reach the workers: "pull" (workers pull the newest from the parameter server every --pull_frequency), "push" (each worker holds a call the trainer answers with every version as it makes it; workers do not poll), or "pull,push"`)
	out := fs.String("out", "", "also write the table (staleness.txt), the results as JSON (staleness.json) and a chart of staleness against workers (staleness.svg) to this `directory`")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	workerCounts, err := parseCounts(*workersList)
	if err != nil {
		return flags.Usagef("staleness: --workers %q: %v", *workersList, err)
	}
	modes := strings.Split(*modeList, ",")
	for _, m := range modes {
		if m != staleness.ModePull && m != staleness.ModePush {
			return flags.Usagef(`staleness: --mode %q, want "pull", "push" or "pull,push"`, *modeList)
		}
	}
	// Flags are checked in their own units, before they become a Config.
	switch {
	case !(*dataMB > 0):
		return flags.Usagef("staleness: --data_size %v MB, want > 0", *dataMB)
	case *dataMB > 1024:
		return flags.Usagef("staleness: --data_size %v MB, want at most 1024", *dataMB)
	}
	for _, fl := range []struct {
		name string
		v    float64
	}{{"push_frequency", *push}, {"pull_frequency", *pull}, {"step_frequency", *step}} {
		if !(fl.v > 0) {
			return flags.Usagef("staleness: --%s %v seconds, want > 0", fl.name, fl.v)
		}
	}
	cfg := staleness.Config{
		DataSize:  int(math.Round(*dataMB * (1 << 20))),
		PushEvery: seconds(*push),
		PullEvery: seconds(*pull),
		StepEvery: seconds(*step),
		Workers:   workerCounts[0],
		Duration:  *duration,
	}
	for _, n := range workerCounts {
		cfg.Workers = n
		if err := cfg.Validate(); err != nil {
			return flags.Usagef("%v", err)
		}
	}
	var protocols []string
	all := *protocol == "all"
	if all {
		protocols = []string{staleness.ProtocolStarwire, staleness.ProtocolAFXDP, staleness.ProtocolGRPC, staleness.ProtocolFilesystem}
	} else {
		for _, p := range strings.Split(*protocol, ",") {
			switch p {
			case staleness.ProtocolStarwire, staleness.ProtocolAFXDP, staleness.ProtocolGRPC, staleness.ProtocolFilesystem:
				protocols = append(protocols, p)
			default:
				return flags.Usagef(`staleness: --protocol %q, want "starwire", "afxdp", "grpc", "filesystem", a list of them or "all"`, *protocol)
			}
		}
	}
	var table []string
	say := func(line string) {
		fmt.Fprintln(stdout, line)
		table = append(table, line)
	}
	say(fmt.Sprintf("staleness: %.1f MB made every %v, %s workers, pulling every %v (pull mode), sampling every %v, %v per run",
		float64(cfg.DataSize)/(1<<20), cfg.PushEvery, *workersList, cfg.PullEvery, cfg.StepEvery, cfg.Duration))
	for _, line := range staleness.Columns(cfg) {
		say(line)
	}
	var results []*staleness.Result
	for _, mode := range modes {
		for _, n := range workerCounts {
			var group []*staleness.Result
			for _, p := range protocols {
				c := cfg
				c.Mode, c.Workers = mode, n
				if p == staleness.ProtocolFilesystem && mode == staleness.ModePush {
					if !all && len(protocols) == 1 {
						return flags.Usagef("staleness: --protocol filesystem runs in pull mode only: a directory cannot push")
					}
					continue
				}
				res, err := runStaleness(ctx, p, c)
				var skip *skipped
				switch {
				case errors.As(err, &skip) && all:
					say(fmt.Sprintf("%-4s %-10s %7d skipped: %s", mode, p, n, skip.why))
					continue
				case errors.As(err, &skip):
					return fmt.Errorf("staleness: --protocol %s: %s", p, skip.why)
				case err != nil:
					return err
				}
				say(res.String())
				group = append(group, res)
			}
			if line := staleness.Compare(group); line != "" {
				say(line)
			}
			results = append(results, group...)
		}
	}
	if line := staleness.CompareModes(results); line != "" {
		say(line)
	}
	if *out != "" {
		paths, err := staleness.WriteOut(*out, table, results)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", strings.Join(paths, ", "))
	}
	return nil
}

// parseCounts parses a comma-separated list of worker counts.
func parseCounts(s string) ([]int, error) {
	var counts []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("want whole numbers separated by commas")
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// skipped says why a protocol cannot run on this machine.
type skipped struct{ why string }

func (s *skipped) Error() string { return s.why }

// runStaleness runs the benchmark over protocol p; a protocol this machine
// or user cannot run is a *skipped.
func runStaleness(ctx context.Context, p string, cfg staleness.Config) (*staleness.Result, error) {
	if p == staleness.ProtocolAFXDP && os.Geteuid() != 0 {
		return nil, &skipped{flags.NoRoot}
	}
	res, err := staleness.Run(ctx, p, cfg)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, staleness.ErrConfig):
		return nil, flags.Usagef("%v", err)
	case p == staleness.ProtocolAFXDP && errors.Is(err, fs.ErrPermission):
		return nil, &skipped{flags.NoRoot}
	case p == staleness.ProtocolAFXDP && errors.Is(err, link.ErrUnavailable):
		return nil, &skipped{err.Error()}
	}
	return nil, err
}

// seconds converts a flag given in (fractional) seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
