package flags

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/starwire/starwire/rpc/cluster"
)

// A UsageError is a mistake on the command line or in the environment
// rather than a failed run; the command exits with status 2 for it.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// PrefixUsage prefixes err with command cmd's name, keeping it a
// UsageError when it is one; nil stays nil.
func PrefixUsage(cmd string, err error) error {
	var ue *UsageError
	if errors.As(err, &ue) {
		return Usagef("%s: %s", cmd, ue.msg)
	}
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", cmd, err)
}

// Parse parses args into fs, printing the flag list and the variables env
// names only when asked for with -h (it then returns flag.ErrHelp); any
// other problem becomes one UsageError.
func Parse(fs *flag.FlagSet, args []string, stdout io.Writer, env []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fmt.Fprintf(stdout, "usage: starwire %s [flags]\n\nflags:\n", fs.Name())
		fs.PrintDefaults()
		PrintEnv(stdout, env)
		return err
	}
	if err != nil {
		return Usagef("%s: %v", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return Usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// PrintEnv lists the variables names, what each does, accepts and
// defaults to.
func PrintEnv(w io.Writer, names []string) {
	if len(names) == 0 {
		return
	}
	fmt.Fprintf(w, "\nenvironment:\n")
	for _, name := range names {
		v, ok := cluster.LookupEnvVar(name)
		if !ok {
			continue
		}
		fmt.Fprintf(w, "  %s\n    \t%s; %s (default %s)\n", v.Name, v.Doc, v.Accepts, v.Default)
	}
}
