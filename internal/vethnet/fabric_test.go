package vethnet

import (
	"net"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/netns/netnstest"
)

// TestBuild joins two workers to two servers and checks every link carries
// UDP between its ends' namespaces.
func TestBuild(t *testing.T) {
	netnstest.Require(t)
	ps := []string{"/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1"}
	workers := []string{"/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"}
	f, err := Build(ps, workers)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Links) != 4 {
		t.Fatalf("%d links, want 4", len(f.Links))
	}
	seen := map[string]bool{}
	for _, l := range f.Links {
		for _, a := range []string{l.PS.Addr.String(), l.Worker.Addr.String()} {
			if seen[a] {
				t.Errorf("address %s given twice", a)
			}
			seen[a] = true
		}
		var srv *net.UDPConn
		if err := f.Do(l.PS.Task, func() (err error) {
			srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: l.PS.Addr.AsSlice(), Port: 9999})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var cli *net.UDPConn
		if err := f.Do(l.Worker.Task, func() (err error) {
			cli, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: l.PS.Addr.AsSlice(), Port: 9999})
			return err
		}); err != nil {
			srv.Close()
			t.Fatal(err)
		}
		got := make(chan bool, 1)
		go func() {
			buf := make([]byte, 16)
			srv.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _, err := srv.ReadFromUDP(buf)
			got <- err == nil && string(buf[:n]) == "hello"
		}()
		// The first datagrams can go while the neighbour entry resolves.
		for range 20 {
			cli.Write([]byte("hello"))
			time.Sleep(10 * time.Millisecond) // paces the resends, as a host's retries would
			if len(got) > 0 {
				break
			}
		}
		if !<-got {
			t.Errorf("no datagram crossed %s (%s) -> %s (%s)", l.Worker.Name, l.Worker.Task, l.PS.Name, l.PS.Task)
		}
		cli.Close()
		srv.Close()
	}
	if err := f.Do("/job:nobody/replica:0/task:0", func() error { return nil }); err == nil {
		t.Error("Do in an unknown task's namespace succeeded")
	}
}
