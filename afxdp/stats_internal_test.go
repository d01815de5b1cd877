package afxdp

import (
	"net/netip"
	"reflect"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/starwire/starwire/afxdp/protocol"

	"github.com/starwire/starwire/afxdp/link"
)

// TestGroupStatsSumsEveryCounter sets every counter of every endpoint of a
// Group to a distinct value and checks that Group.Stats reports, for every
// field of Stats, the sum over the endpoints. Group.Stats once summed 6
// of 10 fields.
func TestGroupStatsSumsEveryCounter(t *testing.T) {
	var links []link.Link
	for i := range 3 {
		a := netip.AddrPortFrom(netip.MustParseAddr("198.18.0.1"), uint16(7100+i))
		b := netip.AddrPortFrom(netip.MustParseAddr("198.18.0.2"), uint16(7100+i))
		la, _ := link.MemPair(a, b, link.MemOptions{})
		links = append(links, la)
	}
	g := NewGroup(links, Options{Backlog: -1})
	defer g.Close()
	// Stop the reactors first, so nothing moves the counters meanwhile.
	for _, e := range g.Endpoints() {
		e.Close()
	}
	for i, e := range g.Endpoints() {
		n := 0
		for _, v := range []reflect.Value{reflect.ValueOf(&e.ctr).Elem(), reflect.ValueOf(&e.env.Ctr).Elem()} {
			for f := range v.NumField() {
				n++
				(*atomic.Uint64)(unsafe.Pointer(v.Field(f).UnsafeAddr())).Store(uint64(1000*(i+1) + n))
			}
		}
		// Releasing a negative amount makes the endpoint hold bytes.
		protocol.NewSession(e.env, protocol.Key{}, nil).Release(-int64(100 * (i + 1)))
	}
	sum := reflect.ValueOf(g.Stats())
	typ := sum.Type()
	for f := range typ.NumField() {
		var want uint64
		for _, e := range g.Endpoints() {
			x := reflect.ValueOf(e.Stats()).Field(f).Uint()
			if x == 0 {
				t.Errorf("Endpoint.Stats().%s is 0: no counter feeds it", typ.Field(f).Name)
			}
			want += x
		}
		if got := sum.Field(f).Uint(); got != want {
			t.Errorf("Group.Stats().%s = %d, want the endpoints' sum %d", typ.Field(f).Name, got, want)
		}
	}
}
