package vethnet

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/netns/netnstest"
)

// TestSegment joins three hosts on a bridge, checks a datagram crosses it
// and is counted, and that deleting one segment leaves another whose name
// begins the same alone.
func TestSegment(t *testing.T) {
	netnstest.Require(t)
	name := "s" + strconv.Itoa(os.Getpid())
	s, err := BuildSegment(name, netip.MustParsePrefix("198.18.7.0/24"), []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Delete()
	other, err := BuildSegment(name+"x", netip.MustParsePrefix("198.18.7.0/24"), []string{"a"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Delete()
	c, _ := s.Host("c")
	if c.Addr != netip.MustParseAddr("198.18.7.3") || c.NS != "swc-"+name+"-c" {
		t.Errorf("host c: %+v", c)
	}
	var srv *net.UDPConn
	if err := s.Do("c", func() (err error) {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: c.Addr.AsSlice(), Port: 9999})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var cli *net.UDPConn
	if err := s.Do("a", func() (err error) {
		cli, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: c.Addr.AsSlice(), Port: 9999})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	got := make(chan bool, 1)
	go func() {
		buf := make([]byte, 16)
		srv.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, _, err := srv.ReadFromUDP(buf)
		got <- err == nil && string(buf[:n]) == "hello"
	}()
	// The first datagram can go while the neighbour entry resolves.
	for range 50 {
		cli.Write([]byte("hello"))
		time.Sleep(10 * time.Millisecond) // paces the resends, as a host's retries would
		if len(got) > 0 {
			break
		}
	}
	if !<-got {
		t.Fatal("no datagram crossed the bridge from a to c")
	}
	if st, err := s.LinkStats("c"); err != nil || st.RxPackets == 0 {
		t.Errorf("c's link counted %+v, %v", st, err)
	}
	if err := s.Delete(); err != nil {
		t.Fatal(err)
	}
	if ns, err := SegmentNamespaces(name); err != nil || len(ns) != 0 {
		t.Errorf("after Delete: %v %v", ns, err)
	}
	if ns, _ := SegmentNamespaces(name + "x"); len(ns) != 2 {
		t.Errorf("the other segment's namespaces: %v, want its host's and its switch's", ns)
	}
	if _, err := BuildSegment("Bad-Name", netip.MustParsePrefix("198.18.7.0/24"), nil); err == nil {
		t.Error("a bad segment name was taken")
	}
}
