package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/handlers/embedding/changes"
)

// checkpointFollow runs "starwire checkpoint follow DIR": a follower of
// the change stream in DIR (package changes), printing each version it
// applies, until interrupted or, with --once, once it has the newest.
func checkpointFollow(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("checkpoint follow", flag.ContinueOnError)
	once := fs.Bool("once", false, "apply the versions there are, print the tables' totals and stop")
	interval := fs.Duration("interval", time.Second, "how often to look for new versions")
	dir, err := parseWithArg(fs, args, stdout)
	if err != nil {
		return err
	}
	if dir == "" {
		return flags.Usagef("checkpoint follow: give the stream's DIR")
	}
	if *interval <= 0 {
		return flags.Usagef("checkpoint follow: --interval must be positive, is %v", *interval)
	}
	f := changes.NewFollower(dir)
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for {
		applied, err := f.Poll()
		for _, a := range applied {
			printApplied(stdout, a)
		}
		if err != nil {
			return fmt.Errorf("checkpoint follow: %w (applied up to version %d)", err, f.Version())
		}
		if *once {
			printTotals(stdout, f)
			return nil
		}
		select {
		case <-ctx.Done():
			printTotals(stdout, f)
			return nil
		case <-tick.C:
		}
	}
}

// printApplied prints one line per version applied:
// "version 3 (steps 3-4): emb 2 rows, 3 evicted (3 removed), 5 in all".
func printApplied(w io.Writer, a changes.Applied) {
	var what []string
	for _, t := range a.Tables {
		switch {
		case t.Full:
			what = append(what, fmt.Sprintf("%s %d rows in full", t.Name, t.Rows))
		default:
			what = append(what, fmt.Sprintf("%s %d rows, %d evicted (%d removed), %d in all", t.Name, t.Rows, t.Evicted, t.Removed, t.Total))
		}
	}
	kind := fmt.Sprintf("steps %d-%d", a.Since, a.Upto)
	if a.Base {
		kind = fmt.Sprintf("base, to step %d", a.Upto)
	}
	fmt.Fprintf(w, "version %d (%s): %s\n", a.Version, kind, strings.Join(what, "; "))
}

// printTotals prints the tables the follower holds.
func printTotals(w io.Writer, f *changes.Follower) {
	var tables []string
	for _, name := range f.Tables() {
		tables = append(tables, fmt.Sprintf("%s %d rows", name, f.Table(name).Len()))
	}
	if len(tables) == 0 {
		tables = []string{"no tables"}
	}
	fmt.Fprintf(w, "at version %d: %s\n", f.Version(), strings.Join(tables, ", "))
}
