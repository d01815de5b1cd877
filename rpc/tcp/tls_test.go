package tcp

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/tlstest"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// testCA signs certificates for the TLS tests.
type testCA struct{ *tlstest.CA }

func newTestCA(t testing.TB, name string) *testCA { return &testCA{tlstest.NewCA(t, name)} }

// files writes a leaf certificate for 127.0.0.1 signed by ca, its key and
// the CA bundle (bundle, or ca when none is given) into dir/name, and
// returns their paths.
func (ca *testCA) files(t testing.TB, dir, name string, bundle ...*testCA) *TLSFiles {
	t.Helper()
	trusted := make([]*tlstest.CA, len(bundle))
	for i, b := range bundle {
		trusted[i] = b.CA
	}
	f := ca.Dir(t, filepath.Join(dir, name), trusted...)
	return &TLSFiles{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}
}

// tlsServer serves echo methods over mutual TLS with sf and returns its
// address.
func tlsServer(t *testing.T, sf *TLSFiles) string {
	t.Helper()
	cfg, err := sf.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	env := newTestEnvOn(t, &Transport{TLS: cfg})
	return env.addr
}

func tlsClient(t *testing.T, addr string, cf *TLSFiles) *rpc.Client {
	t.Helper()
	cfg, err := cf.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	c := rpc.NewClient(addr, rpc.ClientOptions{Transport: &Transport{TLS: cfg}, FailFast: true})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, "cluster CA"), newTestCA(t, "another CA")
	addr := tlsServer(t, ca.files(t, dir, "server"))
	good := tlsClient(t, addr, ca.files(t, dir, "worker"))

	// Multi-MiB tensors both ways, many in flight: the writer encrypts in
	// chunks and writes ciphertext without blocking.
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				n := (1 << 20) * (1 + (c+i)%6)
				data := make([]byte, n)
				pattern(data, uint64(c*16+i))
				var reply rpc.Reply
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				err := good.Call(ctx, mTensor, &rpc.Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(n)}, Data: data}}}, &reply)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(reply.Tensors[0].Data, data) {
					t.Error("answer differs over TLS")
				}
				reply.Release()
			}
		}()
	}
	wg.Wait()

	refused := func(name string, c *rpc.Client) {
		t.Helper()
		var reply rpc.Reply
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := c.Call(ctx, mEcho, &rpc.Request{Meta: []byte("x")}, &reply)
		if err == nil || !strings.Contains(err.Error(), "tls") {
			t.Errorf("%s: err = %v, want a TLS refusal", name, err)
		}
	}
	refused("client that trusts another CA", tlsClient(t, addr, other.files(t, dir, "lost")))
	// Refused at the first handshake, naming the CA that signed the
	// server's certificate and the ones this client trusts, not retried
	// until the call's deadline.
	var reply rpc.Reply
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := tlsClient(t, addr, other.files(t, dir, "lost2")).Call(ctx, mEcho, &rpc.Request{Meta: []byte("x")}, &reply)
	cancel()
	if rpc.CodeOf(err) != wire.Unauthenticated || !strings.Contains(err.Error(), `signed by "CN=cluster CA"`) || !strings.Contains(err.Error(), "(CN=another CA)") {
		t.Errorf("client that trusts another CA: %v (code %v); want Unauthenticated at once, naming both CAs", err, rpc.CodeOf(err))
	}

	// A server says whom it refused and why. Each refused client has a
	// server of its own, whose count and log are that client's alone.
	for _, rc := range []struct {
		name, why string
		client    func(addr string) *rpc.Client
	}{
		{"rogue", `client certificate: x509: certificate signed by unknown authority: \"CN=rogue\" is signed by \"CN=another CA\", not by a CA of`, func(addr string) *rpc.Client {
			return tlsClient(t, addr, other.files(t, dir, "rogue", ca))
		}},
		{"nocert", "client presented no certificate", func(addr string) *rpc.Client {
			noCert, _ := ca.files(t, dir, "nocert").ClientConfig()
			noCert.GetClientCertificate = nil
			c := rpc.NewClient(addr, rpc.ClientOptions{Transport: &Transport{TLS: noCert}, FailFast: true})
			t.Cleanup(func() { c.Close() })
			return c
		}},
	} {
		sf := ca.files(t, dir, "server-for-"+rc.name)
		var log syncBuffer
		sf.Logger = slog.New(slog.NewTextHandler(&log, nil))
		c := rc.client(tlsServer(t, sf))
		refused(rc.name, c)
		// The client hears its certificate was refused, for good.
		var reply rpc.Reply
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Call(ctx, mEcho, &rpc.Request{Meta: []byte("x")}, &reply)
		cancel()
		if rpc.CodeOf(err) != wire.Unauthenticated || !strings.Contains(err.Error(), "refused this end's certificate") {
			t.Errorf("%s: a second call: %v (code %v); want Unauthenticated, the server refusing this end's certificate", rc.name, err, rpc.CodeOf(err))
		}
		if n := sf.Refusals(); n != 1 {
			t.Errorf("%s: the server counted %d refusals, want 1", rc.name, n)
		}
		for _, want := range []string{rc.why, "peer=127.0.0.1:"} {
			if !strings.Contains(log.String(), want) {
				t.Errorf("%s: server log lacks %q:\n%s", rc.name, want, log.String())
			}
		}
	}

	old := &tls.Config{MaxVersion: tls.VersionTLS12, InsecureSkipVerify: true}
	if _, err := tls.Dial("tcp", addr, old); err == nil {
		t.Error("a TLS 1.2 client was accepted")
	}
}

// TestTLSFilesReloaded: a rotated CA bundle and certificate take effect for
// new connections without a restart.
func TestTLSFilesReloaded(t *testing.T) {
	dir := t.TempDir()
	ca1, ca2 := newTestCA(t, "old CA"), newTestCA(t, "new CA")
	sf := ca1.files(t, dir, "server")
	addr := tlsServer(t, sf)
	sf.r.every = 0
	newClient := tlsClient(t, addr, ca2.files(t, dir, "new", ca1))
	var reply rpc.Reply
	if err := newClient.Call(context.Background(), mEcho, &rpc.Request{Meta: []byte("x")}, &reply); err == nil {
		t.Fatal("a certificate of a CA the server does not trust yet was accepted")
	}
	bundle := append(append([]byte{}, ca1.PEM...), ca2.PEM...)
	if err := os.WriteFile(sf.CAFile, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(sf.CAFile, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	again := tlsClient(t, addr, ca2.files(t, dir, "new2", ca1))
	if err := again.Call(context.Background(), mEcho, &rpc.Request{Meta: []byte("x")}, &reply); err != nil {
		t.Fatalf("after the bundle was rotated: %v", err)
	}
	reply.Release()
}

// TestTLSConfigBothEnds: one config serves and dials, as a task's transport
// does.
func TestTLSConfigBothEnds(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "cluster CA")
	cfg, err := ca.files(t, dir, "task").Config()
	if err != nil {
		t.Fatal(err)
	}
	tr := &Transport{TLS: cfg}
	env := newTestEnvOn(t, tr)
	c := rpc.NewClient(env.addr, rpc.ClientOptions{Transport: tr, FailFast: true})
	defer c.Close()
	var reply rpc.Reply
	if err := c.Call(context.Background(), mEcho, &rpc.Request{Meta: []byte("x")}, &reply); err != nil {
		t.Fatal(err)
	}
	reply.Release()
}

// syncBuffer is a log destination written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestTLSFilesErrors(t *testing.T) {
	f := &TLSFiles{CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key", CAFile: "/nonexistent-ca.crt"}
	if _, err := f.ServerConfig(); !errors.Is(err, ErrTLSFiles) {
		t.Errorf("err = %v, want ErrTLSFiles", err)
	}
}

// TestPlaintextClientRefused: a starwire client without TLS, on a port that
// requires it, gets an error saying so rather than a broken connection, with
// a large request too (its unread bytes must not reset the answer away);
// the server logs it and keeps serving its TLS clients. The answer ends with
// the hint the program set (Transport.PlaintextHint).
func TestPlaintextClientRefused(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "cluster CA")
	cfg, err := ca.files(t, dir, "server").ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	const hint = "--certs_here"
	want := rpc.PlaintextRefusal + " (" + hint + ")"
	env := newTestEnvOn(t, &Transport{TLS: cfg, PlaintextHint: hint}, func(s *rpc.Server) { s.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	good := tlsClient(t, env.addr, ca.files(t, dir, "worker"))

	for _, size := range []int{1, 4 << 20} {
		plain := rpc.NewClient(env.addr, rpc.ClientOptions{Transport: &Transport{}, FailFast: true})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var reply rpc.Reply
		err := plain.Call(ctx, mEcho, &rpc.Request{Meta: make([]byte, size)}, &reply)
		cancel()
		plain.Close()
		if !errors.Is(err, rpc.ErrUnauthenticated) || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("plaintext client, %d-byte request: err = %v, want Unauthenticated: %q", size, err, want)
		}
	}
	var reply rpc.Reply
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := good.Call(ctx, mEcho, &rpc.Request{Meta: []byte("x")}, &reply); err != nil {
		t.Errorf("a TLS client after the plaintext ones: %v", err)
	}
	reply.Release()
	for _, want := range []string{"plaintext client refused", "peer=127.0.0.1:"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("server log lacks %q:\n%s", want, log.String())
		}
	}
}

// A refused TLS 1.3 client learns of its refusal only after its own
// handshake is done, when the connection it has dialed already fails: the
// call reports the refusal (Unauthenticated: dialing again would be
// refused alike), and neither it nor the next call dials again before the
// backoff has passed.
func TestRefusedClientDialsOnce(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, "cluster CA"), newTestCA(t, "another CA")
	for round := range 8 {
		sf := ca.files(t, dir, "server")
		addr := tlsServer(t, sf)
		cfg, err := other.files(t, dir, "rogue", ca).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		c := rpc.NewClient(addr, rpc.ClientOptions{Transport: &Transport{TLS: cfg}, FailFast: true, MinBackoff: time.Minute})
		for i := range 2 {
			var reply rpc.Reply
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := c.Call(ctx, mEcho, &rpc.Request{Meta: []byte("x")}, &reply)
			cancel()
			if rpc.CodeOf(err) != wire.Unauthenticated || !strings.Contains(err.Error(), "refused this end's certificate") {
				t.Fatalf("round %d, call %d: err = %v, want Unauthenticated with the TLS refusal", round, i, err)
			}
		}
		if n, st := sf.Refusals(), c.Stats(); n != 1 || st.Reconnects != 0 {
			t.Fatalf("round %d: the server refused %d connections, the client reconnected %d times; want 1 and 0", round, n, st.Reconnects)
		}
		c.Close()
	}
}

// TestTLSReloadFailureLogged: a rotated certificate file that does not
// load keeps the previous material and is logged once per change, not on
// every handshake nor never; loading again is logged too.
func TestTLSReloadFailureLogged(t *testing.T) {
	dir := t.TempDir()
	sf := newTestCA(t, "cluster CA").files(t, dir, "server")
	var log syncBuffer
	sf.Logger = slog.New(slog.NewTextHandler(&log, nil))
	if _, err := sf.ServerConfig(); err != nil {
		t.Fatal(err)
	}
	sf.r.every = 0
	good, err := os.ReadFile(sf.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	rotate := func(data []byte, at time.Time) {
		t.Helper()
		if err := os.WriteFile(sf.CertFile, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(sf.CertFile, at, at); err != nil {
			t.Fatal(err)
		}
	}
	load := func(n int) {
		t.Helper()
		for range n {
			if m, err := sf.r.load(); m == nil || err != nil {
				t.Fatalf("load: %v, %v; want the previous material kept", m, err)
			}
		}
	}
	warnings := func() int { return strings.Count(log.String(), "changed certificate files do not load") }
	base := time.Now()
	rotate([]byte("not a certificate\n"), base.Add(time.Minute))
	load(5)
	if n := warnings(); n != 1 {
		t.Fatalf("%d warnings after 5 handshakes with one bad change, want 1:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), sf.CertFile) {
		t.Errorf("the warning does not name the file:\n%s", log.String())
	}
	rotate([]byte("still not one\n"), base.Add(2*time.Minute))
	load(3)
	if n := warnings(); n != 2 {
		t.Fatalf("%d warnings after a second bad change, want 2:\n%s", n, log.String())
	}
	rotate(good, base.Add(3*time.Minute))
	load(1)
	if !strings.Contains(log.String(), "loaded again") {
		t.Errorf("no line says the files load again:\n%s", log.String())
	}
}
