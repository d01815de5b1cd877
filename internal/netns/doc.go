// Package netns is a test harness: two network namespaces joined by a veth
// pair, with helpers to run code inside either namespace and to add netem
// impairments. It is an ordinary package so tests of several packages can
// share it; nothing in the product imports it.
package netns
