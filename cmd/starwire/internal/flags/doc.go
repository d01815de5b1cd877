// Package flags holds the flag groups starwire's subcommands share, each a
// type that registers its flags on a flag.FlagSet and turns their values
// into what the command runs with: the cluster to join (Cluster, with its
// TLS and Packet groups), the starwire transport (Transport), --afxdp_path,
// --metrics_addr (Metrics) and --pcap (Pcap); and the usage errors
// (UsageError, Usagef, Parse) every subcommand reports a bad command line
// with, which make the command exit with status 2.
package flags
