package netpath

import "testing"

func TestPathNames(t *testing.T) {
	for _, c := range []struct {
		p           Path
		name, title string
	}{
		{TCP, "tcp", "TCP"},
		{AFXDP, "afxdp", "AF_XDP"},
		{UDP, "udp", "the afxdp packet protocol on kernel UDP"},
		{"inmem", "inmem", "inmem"},
	} {
		if c.p.String() != c.name || c.p.Title() != c.title {
			t.Errorf("%q: String %q, Title %q; want %q, %q", string(c.p), c.p.String(), c.p.Title(), c.name, c.title)
		}
	}
}
