// Package linktest opens AF_XDP links for tests (OpenXSK: an XSKLink on
// a network namespace's veth end, failing the test when it cannot), for
// the tests of the packet links and of the packages above them. Only
// tests import it; it imports nothing above link, so that link's own
// tests can use it.
package linktest

import (
	"testing"

	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
)

// XSKPort is the UDP port OpenXSK steers when its options name none.
const XSKPort = 7700

// OpenXSK opens an XSKLink on e's veth end, inside e's namespace, failing
// tb when it cannot.
func OpenXSK(tb testing.TB, e *netns.End, opts link.XSKOptions) *link.XSKLink {
	tb.Helper()
	if opts.Port == 0 {
		opts.Port = XSKPort
	}
	var l *link.XSKLink
	if err := e.Do(func() (err error) { l, err = link.OpenXSK(e.Link, opts); return err }); err != nil {
		tb.Fatal(err)
	}
	return l
}
