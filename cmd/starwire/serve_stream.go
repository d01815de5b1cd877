package main

import (
	"flag"
	"os"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/handlers/embedding/changes"
)

// registerStream registers serve's --stream_dir.
func (f *serveFlags) registerStream(fs *flag.FlagSet) {
	fs.StringVar(&f.streamDir, "stream_dir", "", "the directory KvResourceStreamExport writes the change stream of the task's embedding variables into, for online serving (created if missing; starwire checkpoint follow replays it) (default: the op refused)")
	fs.IntVar(&f.streamKeep, "stream_keep", changes.DefaultKeep, keepUsage)
}

// keepUsage is serve's and train's --stream_keep.
const keepUsage = "with --stream_dir: versions of the change stream kept at least, the newest (0: all); every N-th version holds the tables in full, so that what is kept starts at one, and a follower that falls further behind must start again from it"

// makeStreamDir makes --stream_dir if missing.
func (f *serveFlags) makeStreamDir() error {
	if f.streamKeep < 0 {
		return flags.Usagef("serve: --stream_keep %d, want >= 0", f.streamKeep)
	}
	if f.streamDir == "" {
		return nil
	}
	if err := os.MkdirAll(f.streamDir, 0o755); err != nil {
		return flags.Usagef("serve: --stream_dir: %v", err)
	}
	return nil
}
