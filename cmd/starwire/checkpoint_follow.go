package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/handlers/embedding/changes"
)

// checkpointFollow runs "starwire checkpoint follow DIR": a follower of
// the change stream in DIR (package changes), printing each version it
// applies, until interrupted or, with --once, once it has the newest.
// With --state_file it records each version applied, and a follower
// started again goes on after the last one recorded.
func checkpointFollow(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("checkpoint follow", flag.ContinueOnError)
	once := fs.Bool("once", false, "apply the versions there are, print the tables' totals and stop")
	interval := fs.Duration("interval", time.Second, "how often to look for new versions")
	statePath := fs.String("state_file", "", "record in FILE the last version applied, written atomically after each is applied, before it is printed; started again with it, the follower makes its tables again from the stream and goes on after that version, so that each is applied and printed once (a crash between recording a version and printing it loses its line, not its rows)")
	save := fs.String("save", "", "when it stops, save the tables replayed as a TensorFlow checkpoint at PREFIX: per table NAME, NAME-keys, NAME-values [rows, dim], NAME-freqs and NAME-versions, as an embedding variable is saved")
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
	if dir, err = filepath.Abs(dir); err != nil {
		return flags.Usagef("checkpoint follow: %v", err)
	}
	var after int64
	if *statePath != "" {
		if after, err = readFollowState(*statePath, dir); err != nil {
			return fmt.Errorf("checkpoint follow: %w", err)
		}
	}
	f := changes.NewFollowerAfter(dir, after)
	each := func(a changes.Applied) error {
		if *statePath != "" {
			if err := writeFollowState(*statePath, dir, a.Version); err != nil {
				return err
			}
		}
		printApplied(stdout, a)
		return nil
	}
	stop := func() error {
		printTotals(stdout, f)
		if *save == "" {
			return nil
		}
		if err := saveFollowed(*save, f); err != nil {
			return fmt.Errorf("checkpoint follow: --save: %w", err)
		}
		return nil
	}
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for {
		if err := f.PollEach(each); err != nil {
			return followError(err, f, after, *statePath)
		}
		if *once {
			return stop()
		}
		select {
		case <-ctx.Done():
			return stop()
		case <-tick.C:
		}
	}
}

// followError is the error of a follower's poll, saying where it stands
// and, for one that fell behind, what to do.
func followError(err error, f *changes.Follower, after int64, statePath string) error {
	at := max(f.Version(), after)
	if errors.Is(err, changes.ErrBehind) && statePath != "" {
		return fmt.Errorf("checkpoint follow: %w (at version %d; remove --state_file %s to start again from the newest base)", err, at, statePath)
	}
	return fmt.Errorf("checkpoint follow: %w (applied up to version %d)", err, at)
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
