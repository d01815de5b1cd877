package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/starwire/starwire/afxdp"
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
		return usagef(`staleness: -protocol %q, want "starwire", "afxdp", "grpc" or "all"`, *protocol)
	}
	fmt.Fprintf(stdout, "staleness: %.1f MB pushed every %v, %d workers pulling every %v and sampling every %v, %v per protocol\n",
		float64(cfg.DataSize)/(1<<20), cfg.PushEvery, cfg.Workers, cfg.PullEvery, cfg.StepEvery, cfg.Duration)
	for _, p := range protocols {
		if p == staleness.ProtocolAFXDP && all && os.Geteuid() != 0 {
			fmt.Fprintf(stdout, "%-8s skipped: %s\n", p, noRoot)
			continue
		}
		res, err := staleness.Run(ctx, p, cfg)
		if err != nil {
			if errors.Is(err, staleness.ErrConfig) {
				return usagef("%v", err)
			}
			if p == staleness.ProtocolAFXDP && all && errors.Is(err, afxdp.ErrUnavailable) {
				fmt.Fprintf(stdout, "%-8s skipped: %v\n", p, err)
				continue
			}
			return err
		}
		fmt.Fprintln(stdout, res)
	}
	return nil
}

// seconds converts a flag given in (fractional) seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
