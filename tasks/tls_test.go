package tasks

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/internal/tlstest"
	"github.com/starwire/starwire/metrics"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire/tfpb"
)

func tlsFiles(f tlstest.Files) *tcp.TLSFiles {
	return &tcp.TLSFiles{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}
}

// TestMutualTLSRefuses starts a cluster with mutual TLS and checks that its
// own peers and drivers get in on both ports, while a client with a
// certificate of another CA, or with none, is refused on the starwire port
// and on the gRPC port, with an error naming TLS on its side and a line
// naming the client and the reason on the task's.
func TestMutualTLSRefuses(t *testing.T) {
	dir := t.TempDir()
	ca, other := tlstest.NewCA(t, "cluster CA"), tlstest.NewCA(t, "another CA")
	files := tlsFiles(ca.Dir(t, filepath.Join(dir, "task")))
	var log lockedBuffer
	files.Logger = slog.New(slog.NewTextHandler(&log, nil))
	m := metrics.New()
	l, err := StartLocal(LocalOptions{PS: 1, Workers: 1, Protocol: cluster.ProtocolGRPCSeastar, Dir: dir, Logger: quiet, TLS: files, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := l.Servers[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	driverFiles := tlsFiles(ca.Dir(t, filepath.Join(dir, "driver")))
	for _, protocol := range []cluster.Protocol{cluster.ProtocolGRPCSeastar, cluster.ProtocolGRPC} {
		layout := l.Layout
		layout.Protocol, layout.TLS = protocol, driverFiles
		peers := NewPeers(layout)
		c, err := peers.Caller(s.Task())
		if err == nil {
			_, err = c.GetStatus(ctx)
		}
		peers.Close()
		if err != nil {
			t.Fatalf("a client of the cluster's CA over %s: %v", protocol, err)
		}
	}

	rogue := tlsFiles(other.Dir(t, filepath.Join(dir, "rogue"), ca))
	noCert, err := tlsFiles(ca.Dir(t, filepath.Join(dir, "nocert"))).Config()
	if err != nil {
		t.Fatal(err)
	}
	noCert.GetClientCertificate = nil
	rogueCfg, err := rogue.Config()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		cfg  func() (*tcp.Transport, grpc.DialOption)
	}{
		{"a certificate of another CA", func() (*tcp.Transport, grpc.DialOption) {
			return &tcp.Transport{TLS: rogueCfg}, grpc.WithTransportCredentials(confirmedCreds{credentials.NewTLS(rogueCfg), nil})
		}},
		{"no certificate", func() (*tcp.Transport, grpc.DialOption) {
			return &tcp.Transport{TLS: noCert}, grpc.WithTransportCredentials(confirmedCreds{credentials.NewTLS(noCert), nil})
		}},
	} {
		tr, creds := bad.cfg()
		before := files.Refusals()
		sc := rpc.NewClient(s.StarAddr, rpc.ClientOptions{Transport: tr, FailFast: true})
		err := sc.CallProto(ctx, handlers.MethodGetStatus, &tfpb.GetStatusRequest{}, new(tfpb.GetStatusResponse))
		sc.Close()
		if err == nil || !strings.Contains(err.Error(), "tls: bad certificate") {
			t.Errorf("starwire client with %s: err = %v, want a TLS refusal", bad.name, err)
		}
		gc, err := handlers.DialGRPC(s.Task(), s.GRPCAddr, creds)
		if err != nil {
			t.Fatal(err)
		}
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = gc.GetStatus(callCtx)
		cancel()
		gc.Close()
		if err == nil || !strings.Contains(err.Error(), "tls: bad certificate") {
			t.Errorf("gRPC client with %s: err = %v, want a TLS refusal", bad.name, err)
		}
		if n := files.Refusals() - before; n < 2 {
			t.Errorf("the task counted %d refusals of the client with %s, want one per port at least", n, bad.name)
		}
	}
	if got, want := counterValue(t, m, "starwire_tls_refused_total"), float64(files.Refusals()); got != want || got < 4 {
		t.Errorf("starwire_tls_refused_total = %v, want the %v refusals counted (4 at least)", got, want)
	}
	for _, want := range []string{"client certificate: x509: certificate signed by unknown authority", "client presented no certificate", "peer=127.0.0.1:"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the task's log lacks %q:\n%s", want, log.String())
		}
	}

	// A plaintext client gets nothing from either port, and an error that
	// says the task requires TLS.
	before := files.Refusals()
	plain := rpc.NewClient(s.StarAddr, rpc.ClientOptions{Transport: &tcp.Transport{}, FailFast: true})
	defer plain.Close()
	err = plain.CallProto(ctx, handlers.MethodGetStatus, &tfpb.GetStatusRequest{}, new(tfpb.GetStatusResponse))
	if !errors.Is(err, rpc.ErrUnauthenticated) || !strings.Contains(err.Error(), rpc.PlaintextRefusal) {
		t.Errorf("a plaintext starwire client: err = %v, want Unauthenticated: %s", err, rpc.PlaintextRefusal)
	}
	pg, err := handlers.DialGRPC(s.Task(), s.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	callCtx, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	_, err = pg.GetStatus(callCtx)
	if !errors.Is(err, rpc.ErrUnauthenticated) || !strings.Contains(err.Error(), rpc.PlaintextRefusal) {
		t.Errorf("a plaintext gRPC client: err = %v, want Unauthenticated: %s", err, rpc.PlaintextRefusal)
	}
	if files.Refusals() == before {
		t.Error("the task did not count the plaintext gRPC client")
	}
}

// lockedBuffer is a log destination written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// counterValue returns the sum of the named metric's series.
func counterValue(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, s := range f.GetMetric() {
				sum += s.GetCounter().GetValue()
			}
		}
	}
	return sum
}
