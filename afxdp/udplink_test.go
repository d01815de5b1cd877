package afxdp_test

import (
	"testing"

	"github.com/starwire/starwire/afxdp/link"
)

func listenUDP(t testing.TB, addr string) *link.UDPLink {
	t.Helper()
	l, err := link.ListenUDP(addr, link.UDPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
