package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
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
// started again goes on after the last one recorded. A follower started
// before its ps waits for DIR to be made (--wait), saying so every
// waitReport on stderr.
func checkpointFollow(ctx context.Context, args []string, stdout io.Writer) error {
	return follow(ctx, args, stdout, slog.Default())
}

// follow is checkpointFollow saying what it waits for to log.
func follow(ctx context.Context, args []string, stdout io.Writer, log *slog.Logger) error {
	fs := flag.NewFlagSet("checkpoint follow", flag.ContinueOnError)
	once := fs.Bool("once", false, "apply the versions there are, print the tables' totals and stop")
	interval := fs.Duration("interval", time.Second, "how often to look for new versions, and for DIR while it does not exist")
	wait := fs.Duration("wait", 0, "how long to wait for DIR to be made when it does not exist yet (a follower started before its ps), saying so on stderr every 5s: 0 waits until interrupted, a negative duration fails at once; with --once the default is not to wait")
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
	if *once && !flagGiven(fs, "wait") {
		*wait = -1
	}
	if err := waitForDir(ctx, dir, *wait, *interval, log); err != nil {
		return fmt.Errorf("checkpoint follow: %w", err)
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

// flagGiven reports whether the command line set fs's flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// waitReport is how often a follower waiting for its directory says so.
const waitReport = 5 * time.Second

// waitForDir waits for dir to exist, looking every interval, for at most
// wait (0: until ctx is done; negative: not at all), reporting to log
// every waitReport what it waits for. A dir that exists but cannot be
// read is the first poll's error, not a reason to wait.
func waitForDir(ctx context.Context, dir string, wait, interval time.Duration, log *slog.Logger) error {
	_, err := os.Stat(dir)
	if !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if wait < 0 {
		return fmt.Errorf("the stream's directory %s does not exist (the ps's --stream_dir; --wait waits for it to be made): %w", dir, err)
	}
	start := time.Now()
	look, report := time.NewTicker(interval), time.NewTicker(waitReport)
	defer look.Stop()
	defer report.Stop()
	var deadline <-chan time.Time
	if wait > 0 {
		deadline = time.After(wait)
	}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped waiting for the stream's directory %s: %w", dir, context.Cause(ctx))
		case <-deadline:
			return fmt.Errorf("the stream's directory %s was not made in --wait %v (the ps's --stream_dir): %w", dir, wait, err)
		case <-report.C:
			log.Info(fmt.Sprintf("checkpoint follow: waiting for %s, the ps's --stream_dir, to be made: %v so far", dir, time.Since(start).Round(time.Second)))
		case <-look.C:
			if _, err = os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				return nil
			}
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
