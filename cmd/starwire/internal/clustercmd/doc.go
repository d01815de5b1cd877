// Package clustercmd is "starwire cluster": it builds a cluster of test
// hosts on this machine, each a network namespace on one bridge, runs a
// starwire task in each and trains on it over AF_XDP and over TCP (up,
// down, run, which need root), and writes what a cluster elsewhere needs
// (endpoints: the endpoint map of TF_CONFIG's cluster; manifests:
// Kubernetes manifests). Its tasks are the starwire binary itself, run
// as "starwire serve" and "starwire train".
package clustercmd
