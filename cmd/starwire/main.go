// Command starwire runs a parameter-server cluster over starwire: a local
// training job (train), one long-lived task of a cluster (serve), and the
// parameter-serving staleness benchmark (staleness).
//
// With no flags, train starts one parameter server and two workers in this
// process over grpc+seastar and trains a sparse logistic-regression model
// on synthetic clicks; as root it gives each task a network namespace and
// carries the workers' RecvTensor calls over AF_XDP (--afxdp off: TCP).
// --protocol grpc runs the same job over gRPC.
//
// A cluster of separate processes, on ports the kernel picks:
//
//	starwire serve --job ps --task 0 --ps 1 --workers 2 --registry_dir /tmp/reg &
//	starwire serve --job worker --task 0 --ps 1 --workers 2 --registry_dir /tmp/reg &
//	starwire serve --job worker --task 1 --ps 1 --workers 2 --registry_dir /tmp/reg &
//	starwire train --registry_dir /tmp/reg
//
// or on known ports, with --cluster ps=h:p;worker=h:p,h:p (or TF_CONFIG)
// and, for grpc+seastar, the endpoint map (.endpoint_map or
// TF_SEASTAR_ENDPOINT_MAP_PATH). Errors are one line on stderr; the exit
// status is 2 for a bad command line and 1 for a failed run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// A usageError is a mistake on the command line rather than a failed run;
// it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

const usage = `usage: starwire <command> [flags]

commands:
  train      train a sparse logistic-regression model on a local or existing cluster
  serve      run one task (--job, --task) of a cluster as a long-lived server
  staleness  measure parameter staleness over starwire and gRPC

run "starwire <command> -h" for a command's flags`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status: 0 on
// success, 2 for a bad command line, 1 when the run failed. Errors are one
// line on stderr.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "train":
		err = trainCmd(ctx, args[1:], stdout)
	case "serve":
		err = serveCmd(ctx, args[1:], stdout)
	case "staleness":
		err = stalenessCmd(ctx, args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	default:
		err = usagef("unknown command %q (want train, serve or staleness)", args[0])
	}
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "starwire: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "starwire: %v\n", err)
		return 1
	}
}

// parseFlags parses args into fs, printing the flag list only when asked
// for with -h; any other problem becomes one errUsage line.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		fmt.Fprintf(stdout, "usage: starwire %s [flags]\n", fs.Name())
		fs.PrintDefaults()
		return err
	}
	if err != nil {
		return usagef("%s: %v", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}
