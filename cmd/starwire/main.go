// Command starwire runs a parameter-server cluster over starwire: a local
// training job (train), one long-lived task of a cluster (serve), the
// parameter-serving staleness benchmark (staleness), the transport sweep
// (bench), a probe of a task's health (health), test clusters of network
// namespaces and Kubernetes manifests (cluster, in package
// internal/clustercmd), a listing of a TensorFlow checkpoint's tensors and
// increments (checkpoint inspect) and the replay of an embedding's change
// stream (checkpoint follow). This package dispatches to the subcommands; the
// flag groups they share are package internal/flags.
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
// status is 2 for a bad command line or environment variable, 1 for a
// failed run, and 128 plus the signal's number when a signal (or a closed
// standard output) stopped it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/starwire/starwire/cmd/starwire/internal/clustercmd"
	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/internal/logline"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
)

// A command is one of starwire's subcommands.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout io.Writer) error
}

// taskEnv is what a command that runs tasks reads.
var taskEnv = []string{
	cluster.EnvTFConfig, cluster.EnvEndpointMapPath, cluster.EnvCoreNumber, cluster.EnvPSCoreNumber, cluster.EnvWorkerCoreNumber,
	cluster.EnvPSPolling, cluster.EnvWorkerPolling, cluster.EnvPSDisablePin, cluster.EnvWorkerDisablePin, cluster.EnvAFXDPPath,
	cluster.EnvTLSDir, cluster.EnvTLSCert, cluster.EnvTLSKey, cluster.EnvTLSCA, cluster.EnvPacketTicketFile,
}

// commandEnv lists the variables each command reads: its -h shows them
// and it refuses to start when one holds a value it does not accept.
var commandEnv = map[string][]string{
	"train":     taskEnv,
	"serve":     taskEnv,
	"staleness": {cluster.EnvCoreNumber, cluster.EnvAFXDPPath},
	"bench":     {cluster.EnvCoreNumber},
	"health":    {cluster.EnvTLSDir, cluster.EnvTLSCert, cluster.EnvTLSKey, cluster.EnvTLSCA},
	"cluster":   clustercmd.Env,
}

var commands = []command{
	{"train", "train a sparse logistic-regression model on a local or existing cluster", trainCmd},
	{"serve", "run one task (--job, --task) of a cluster as a long-lived server", serveCmd},
	{"staleness", "measure parameter staleness over starwire and gRPC", stalenessCmd},
	{"bench", "sweep sizes, calls in flight and reactors over gRPC and starwire's paths; write a table and JSON", benchCmd},
	{"health", "probe a task: the gRPC health service on its gRPC port, or its starwire port", healthCmd},
	{"cluster", "up, down or run a cluster of test hosts, network namespaces on a bridge, over AF_XDP and TCP", clustercmd.Run},
	{"checkpoint", "inspect a TensorFlow checkpoint (tensor_bundle V2): its tensors, shapes and values", checkpointCmd},
}

func lookupCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage() string {
	var b strings.Builder
	b.WriteString("usage: starwire <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	b.WriteString("\nrun \"starwire <command> -h\" for a command's flags and environment variables,\n\"starwire --version\" for the build's version and revision")
	return b.String()
}

func main() {
	// Libraries log to slog's default logger: in the command's one format.
	slog.SetDefault(logline.NewLevel(os.Stderr, "starwire: ", slog.LevelInfo))
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit status: 0 on
// success, 2 for a bad command line or variable, 1 when the run failed,
// 128+n when signal n stopped it. Errors are one line on stderr.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage())
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage())
		return 0
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, version())
		return 0
	}
	cmd, ok := lookupCommand(args[0])
	if !ok {
		fmt.Fprintf(stderr, "starwire: unknown command %q (want train, serve, staleness, bench, health, cluster or checkpoint)\n", args[0])
		return 2
	}
	if err := cluster.CheckEnv(commandEnv[cmd.name]...); err != nil && !wantsHelp(args[1:]) {
		fmt.Fprintf(stderr, "starwire: %s: %v\n", cmd.name, err)
		return 2
	}
	// rpc reads no variable: the shared TCP reactors get
	// SEASTAR_CORE_NUMBER's count from here.
	tcp.SetSharedReactors(cluster.CoreNumber())
	ctx, stop := stopOnSignals(context.Background())
	defer stop.release()
	out := &stdoutWriter{w: stdout, closed: func() { stop.cancel(errStdoutClosed) }}
	err := cmd.run(ctx, args[1:], out)
	return exitStatus(ctx, cmd.name, err, stderr)
}

// exitStatus reports the error of command name, if any, and returns the
// exit status.
func exitStatus(ctx context.Context, name string, err error, stderr io.Writer) int {
	var ue *flags.UsageError
	var stopped *stopError
	switch {
	case errors.As(context.Cause(ctx), &stopped) && (err != nil || stopped.sig == 0):
		if stopped.sig == 0 {
			return stopped.status // stdout closed: say nothing, as a killed pipeline does
		}
		if err != nil {
			fmt.Fprintf(stderr, "starwire: %s: %v\n", name, stopped)
			return stopped.status
		}
		return 0 // a server's normal end
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

// wantsHelp reports whether args ask for help, which a bad variable must
// not prevent: help is how to find out what the variable accepts.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--h", "--help":
			return true
		case "--", "-":
			return false
		}
	}
	return false
}

// parseFlags parses args into fs as flags.Parse does, listing the
// command's environment variables with -h.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	return flags.Parse(fs, args, stdout, commandEnv[fs.Name()])
}
