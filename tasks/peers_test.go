package tasks

import (
	"log/slog"
	"testing"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/wire/tfpb"
)

// testLayout is a grpc+seastar layout of a ps and a worker.
func testLayout(t *testing.T) Layout {
	t.Helper()
	spec, err := cluster.ParseSpec("ps=127.0.0.1:1001;worker=127.0.0.1:1002")
	if err != nil {
		t.Fatal(err)
	}
	em := cluster.NewEndpointMap("test")
	if err := em.Add("127.0.0.1:1001", "127.0.0.1:2001"); err != nil {
		t.Fatal(err)
	}
	if err := em.Add("127.0.0.1:1002", "127.0.0.1:2002"); err != nil {
		t.Fatal(err)
	}
	return Layout{Protocol: cluster.ProtocolGRPCSeastar, Cluster: spec, Endpoints: em}
}

// TestPeersRepoint: a task re-pointed gets a new Caller at its new
// addresses; re-pointed at the same ones, a new Caller all the same.
func TestPeersRepoint(t *testing.T) {
	p := NewPeers(testLayout(t))
	defer p.Close()
	const ps = "/job:ps/replica:0/task:0"
	c1, err := p.Caller(ps)
	if err != nil {
		t.Fatal(err)
	}
	moved := Addrs{GRPC: "127.0.0.1:3001", Star: "127.0.0.1:4001"}
	if changed, err := p.Repoint(ps, moved); err != nil || !changed {
		t.Fatalf("Repoint to new addresses: %v, %v; want changed", changed, err)
	}
	if a, _ := p.Addrs(ps); a != moved {
		t.Errorf("addresses %v after Repoint, want %v", a, moved)
	}
	c2, _ := p.Caller(ps)
	if c2 == c1 {
		t.Error("the Caller was not made again")
	}
	if changed, err := p.Repoint(ps, moved); err != nil || changed {
		t.Errorf("Repoint to the same addresses: %v, %v; want unchanged", changed, err)
	}
	if c3, _ := p.Caller(ps); c3 == c2 {
		t.Error("the Caller was not made again at the same addresses")
	}
}

// TestFollowCluster: a session's cluster naming a peer at a new gRPC
// address re-points the task's peers at it, the starwire address from
// the peer's registry entry; an address the entry does not give is left
// alone.
func TestFollowCluster(t *testing.T) {
	s := &Server{Job: "worker", peers: NewPeers(testLayout(t)), logger: slog.New(slog.DiscardHandler)}
	defer s.peers.Close()
	reg := Addrs{GRPC: "127.0.0.1:3001", Star: "127.0.0.1:4001"}
	s.Lookup = func(string) (Addrs, error) { return reg, nil }
	def := func(psAddr string) *tfpb.ClusterDef {
		return &tfpb.ClusterDef{Job: []*tfpb.JobDef{
			{Name: "ps", Tasks: map[int32]string{0: psAddr}},
			{Name: "worker", Tasks: map[int32]string{0: "127.0.0.1:1002"}},
			{Name: "chief", Tasks: map[int32]string{0: "127.0.0.1:9"}},
		}}
	}
	if err := s.followCluster(def("127.0.0.1:3001")); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.peers.Addrs("/job:ps/replica:0/task:0"); a != reg {
		t.Errorf("ps at %v, want %v", a, reg)
	}
	// An address the registry does not give is left alone.
	if err := s.followCluster(def("127.0.0.1:5001")); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.peers.Addrs("/job:ps/replica:0/task:0"); a != reg {
		t.Errorf("ps at %v after a session named it at an address the registry does not give, want %v", a, reg)
	}
}

// TestPeersReachGRPCOnlyJobOverGRPC: under grpc+seastar, the task of a
// job the endpoint map has no address of (a TensorFlow master's client
// job) is reached over gRPC, and the cluster's own tasks over starwire.
func TestPeersReachGRPCOnlyJobOverGRPC(t *testing.T) {
	l := testLayout(t)
	spec, err := cluster.ParseSpec("ps=127.0.0.1:1001;worker=127.0.0.1:1002;client=127.0.0.1:1003")
	if err != nil {
		t.Fatal(err)
	}
	l.Cluster = spec
	if err := l.Check(); err != nil {
		t.Fatalf("Check with a client job: %v", err)
	}
	p := NewPeers(l)
	defer p.Close()
	const client = "/job:client/replica:0/task:0"
	if a, err := p.Addrs(client); err != nil || a != (Addrs{GRPC: "127.0.0.1:1003"}) {
		t.Fatalf("Addrs(client) = %v, %v; want its gRPC address alone", a, err)
	}
	c, err := p.Caller(client)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*handlers.GRPCCaller); !ok {
		t.Errorf("the client's Caller is %T, want a gRPC one", c)
	}
	ps, err := p.Caller("/job:ps/replica:0/task:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ps.(*handlers.GRPCCaller); ok {
		t.Error("the ps's Caller is a gRPC one under grpc+seastar")
	}
}
