package main

import (
	"flag"
	"os"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
)

// registerStream registers serve's --stream_dir.
func (f *serveFlags) registerStream(fs *flag.FlagSet) {
	fs.StringVar(&f.streamDir, "stream_dir", "", "the directory KvResourceStreamExport writes the change stream of the task's embedding variables into, for online serving (created if missing; starwire checkpoint follow replays it) (default: the op refused)")
}

// makeStreamDir makes --stream_dir if missing.
func (f *serveFlags) makeStreamDir() error {
	if f.streamDir == "" {
		return nil
	}
	if err := os.MkdirAll(f.streamDir, 0o755); err != nil {
		return flags.Usagef("serve: --stream_dir: %v", err)
	}
	return nil
}
