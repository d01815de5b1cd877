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
	"time"

	"github.com/starwire/starwire/afxdp/link"
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
	workers := fs.Int("workers", def.Workers, "number of pseudo workers")
	duration := fs.Duration("duration", def.Duration, "how long each protocol runs")
	protocol := fs.String("protocol", "all", `"starwire" (TCP), "afxdp" (root; namespaces and veth pairs), "grpc", or "all"`)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	// Flags are checked in their own units, before they become a Config.
	switch {
	case !(*dataMB > 0):
		return usagef("staleness: --data_size %v MB, want > 0", *dataMB)
	case *dataMB > 1024:
		return usagef("staleness: --data_size %v MB, want at most 1024", *dataMB)
	}
	for _, fl := range []struct {
		name string
		v    float64
	}{{"push_frequency", *push}, {"pull_frequency", *pull}, {"step_frequency", *step}} {
		if !(fl.v > 0) {
			return usagef("staleness: --%s %v seconds, want > 0", fl.name, fl.v)
		}
	}
	cfg := staleness.Config{
		DataSize:  int(math.Round(*dataMB * (1 << 20))),
		PushEvery: seconds(*push),
		PullEvery: seconds(*pull),
		StepEvery: seconds(*step),
		Workers:   *workers,
		Duration:  *duration,
	}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	var protocols []string
	all := *protocol == "all"
	switch *protocol {
	case "all":
		protocols = []string{staleness.ProtocolStarwire, staleness.ProtocolAFXDP, staleness.ProtocolGRPC}
	case staleness.ProtocolStarwire, staleness.ProtocolAFXDP, staleness.ProtocolGRPC:
		protocols = []string{*protocol}
	default:
		return usagef(`staleness: --protocol %q, want "starwire", "afxdp", "grpc" or "all"`, *protocol)
	}
	fmt.Fprintf(stdout, "staleness: %.1f MB pushed every %v, %s pulling every %v and sampling every %v, %v per protocol\n",
		float64(cfg.DataSize)/(1<<20), cfg.PushEvery, plural(cfg.Workers, "worker"), cfg.PullEvery, cfg.StepEvery, cfg.Duration)
	for _, line := range staleness.Columns(cfg) {
		fmt.Fprintln(stdout, line)
	}
	var results []*staleness.Result
	for _, p := range protocols {
		res, err := runStaleness(ctx, p, cfg)
		var skip *skipped
		switch {
		case errors.As(err, &skip) && all:
			fmt.Fprintf(stdout, "%-8s skipped: %s\n", p, skip.why)
			continue
		case errors.As(err, &skip):
			return fmt.Errorf("staleness: --protocol %s: %s", p, skip.why)
		case err != nil:
			return err
		}
		fmt.Fprintln(stdout, res)
		results = append(results, res)
	}
	if line := staleness.Compare(results); line != "" {
		fmt.Fprintln(stdout, line)
	}
	return nil
}

// skipped says why a protocol cannot run on this machine.
type skipped struct{ why string }

func (s *skipped) Error() string { return s.why }

// runStaleness runs the benchmark over protocol p; a protocol this machine
// or user cannot run is a *skipped.
func runStaleness(ctx context.Context, p string, cfg staleness.Config) (*staleness.Result, error) {
	if p == staleness.ProtocolAFXDP && os.Geteuid() != 0 {
		return nil, &skipped{noRoot}
	}
	res, err := staleness.Run(ctx, p, cfg)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, staleness.ErrConfig):
		return nil, usagef("%v", err)
	case p == staleness.ProtocolAFXDP && errors.Is(err, fs.ErrPermission):
		return nil, &skipped{noRoot}
	case p == staleness.ProtocolAFXDP && errors.Is(err, link.ErrUnavailable):
		return nil, &skipped{err.Error()}
	}
	return nil, err
}

// seconds converts a flag given in (fractional) seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
