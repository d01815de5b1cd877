package tcp

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// TLSFiles configures mutual TLS from PEM files, as Kubernetes mounts a
// secret: a certificate, its key and the bundle of CAs whose certificates
// peers must present. The files are read again when they change (checked
// at most once a second, on new handshakes), so a rotated secret takes
// effect without a restart; connections already made keep their keys.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
	// Logger receives a line for each client a server refuses (the first,
	// second, fourth, ... so that a flood logs a few); nil means
	// slog.Default().
	Logger *slog.Logger
	// Hint names where the program takes these files from, such as its
	// flags, for the answer a plaintext client gets (rpc.PlaintextAnswer,
	// Transport.PlaintextHint).
	Hint string

	once    sync.Once
	r       *tlsReloader
	err     error
	refused atomic.Uint64
}

// ErrTLSFiles is wrapped by errors reading or parsing the files.
var ErrTLSFiles = errors.New("tcp: tls files")

// ServerConfig returns a config for a server that requires every client to
// present a certificate signed by one of the CAs. A client refused is
// logged with its address and the reason, and counted (Refusals); it sees
// a bad_certificate alert.
func (f *TLSFiles) ServerConfig() (*tls.Config, error) {
	r, err := f.reloader()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			m, err := r.load()
			if err != nil {
				return nil, err
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				Certificates: []tls.Certificate{m.cert},
				// Verified below, so that a refusal is reported with the
				// peer's address, which Go's own check does not give.
				ClientAuth: tls.RequestClientCert,
				VerifyConnection: func(cs tls.ConnectionState) error {
					err := verifyPeer(cs, m, "", x509.ExtKeyUsageClientAuth)
					if err != nil {
						f.refuse(hello.Conn, err)
					}
					return err
				},
			}, nil
		},
	}, nil
}

// Config returns one config for both ends, for a transport that serves and
// dials: a server's handshakes take ServerConfig's settings (tls.Config's
// GetConfigForClient replaces the whole config), a client's ClientConfig's.
func (f *TLSFiles) Config() (*tls.Config, error) {
	srv, err := f.ServerConfig()
	if err != nil {
		return nil, err
	}
	cfg, err := f.ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.GetConfigForClient = srv.GetConfigForClient
	return cfg, nil
}

// Refusals returns how many clients servers using f's configs refused.
func (f *TLSFiles) Refusals() uint64 { return f.refused.Load() }

// Refused counts and logs a client that a server using f's configs
// refused outside the TLS handshake, for instance one that spoke plaintext.
func (f *TLSFiles) Refused(c net.Conn, err error) { f.refuse(c, err) }

func (f *TLSFiles) refuse(c net.Conn, err error) {
	n := f.refused.Add(1)
	if n&(n-1) != 0 {
		return
	}
	l := f.Logger
	if l == nil {
		l = slog.Default()
	}
	var peer any = "unknown"
	if c != nil {
		peer = c.RemoteAddr()
	}
	l.Warn("tcp: tls: client refused", "peer", peer, "err", err, "refused", n)
}

// ClientConfig returns a config for a client that presents its certificate
// and accepts a server only with a certificate, for the name it dials,
// signed by one of the CAs.
func (f *TLSFiles) ClientConfig() (*tls.Config, error) {
	r, err := f.reloader()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m, err := r.load()
			if err != nil {
				return nil, err
			}
			return &m.cert, nil
		},
		// The CA pool may change under a live config, which RootCAs cannot
		// express: verification is done here, in full, with the current one.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			m, err := r.load()
			if err != nil {
				return err
			}
			return verifyPeer(cs, m, cs.ServerName, x509.ExtKeyUsageServerAuth)
		},
	}, nil
}

// verifyPeer checks the peer's chain against m's CAs, for name when not
// empty, with usage: a server's certificate must be for the name dialed.
// A peer that fails is refused for good (wire.Unauthenticated), not
// retried: its certificate does not change from one dial to the next. A
// chain of another CA names that CA and the ones trusted here, the usual
// mistake being a secret of another cluster.
func verifyPeer(cs tls.ConnectionState, m *tlsMaterial, name string, usage x509.ExtKeyUsage) error {
	side := "server"
	if usage == x509.ExtKeyUsageClientAuth {
		side = "client"
	}
	if len(cs.PeerCertificates) == 0 {
		return rpc.Errorf(wire.Unauthenticated, "tcp: tls: %s presented no certificate", side)
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	_, err := leaf.Verify(x509.VerifyOptions{
		DNSName:       name,
		Roots:         m.pool,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	})
	var unknown x509.UnknownAuthorityError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &unknown):
		return rpc.Errorf(wire.Unauthenticated, "tcp: tls: %s certificate: %w: %q is signed by %q, not by a CA of %s (%s)",
			side, err, leaf.Subject.String(), leaf.Issuer.String(), m.caFile, strings.Join(m.caNames, "; "))
	}
	return rpc.Errorf(wire.Unauthenticated, "tcp: tls: %s certificate: %w", side, err)
}

func (f *TLSFiles) reloader() (*tlsReloader, error) {
	f.once.Do(func() {
		log := f.Logger
		if log == nil {
			log = slog.Default()
		}
		f.r = &tlsReloader{files: [3]string{f.CertFile, f.KeyFile, f.CAFile}, every: time.Second, log: log}
		_, f.err = f.r.load()
	})
	return f.r, f.err
}

// tlsMaterial is what the files held when last read.
type tlsMaterial struct {
	cert    tls.Certificate
	pool    *x509.CertPool
	caFile  string
	caNames []string // the CAs' subjects, for the messages that name them
}

type tlsReloader struct {
	files [3]string     // cert, key, CA
	every time.Duration // between looks at the files
	log   *slog.Logger  // told once of each change that does not load

	mu      sync.Mutex
	cur     *tlsMaterial
	stamp   [3]time.Time
	checked time.Time
	failed  string // the last change that did not load, as logged
}

// load returns the files' material, reading them again when they changed.
// A change that does not parse keeps the previous material.
func (r *tlsReloader) load() (*tlsMaterial, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.cur != nil && now.Sub(r.checked) < r.every {
		return r.cur, nil
	}
	r.checked = now
	var stamp [3]time.Time
	for i, name := range r.files {
		st, err := os.Stat(name)
		if err != nil {
			return r.keep(stamp, fmt.Errorf("%w: %v", ErrTLSFiles, err))
		}
		stamp[i] = st.ModTime()
	}
	if r.cur != nil && stamp == r.stamp {
		return r.cur, nil
	}
	m, err := readTLSMaterial(r.files)
	if err != nil {
		return r.keep(stamp, err)
	}
	if r.failed != "" {
		r.log.Info("tcp: tls: certificate files loaded again", "cert", r.files[0])
	}
	r.cur, r.stamp, r.failed = m, stamp, ""
	return m, nil
}

// keep answers a look at the files that found them changed but unusable
// (stamp, their times, err, why): the previous material, if any, and one
// log line per change, so that a rotated secret that does not parse is
// heard of, once, while handshakes go on with the old one.
func (r *tlsReloader) keep(stamp [3]time.Time, err error) (*tlsMaterial, error) {
	if r.cur == nil {
		return nil, err
	}
	if key := fmt.Sprint(stamp, err); key != r.failed {
		r.failed = key
		r.log.Warn("tcp: tls: changed certificate files do not load; keeping the previous ones", "err", err)
	}
	return r.cur, nil
}

func readTLSMaterial(files [3]string) (*tlsMaterial, error) {
	cert, err := tls.LoadX509KeyPair(files[0], files[1])
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s, key %s: %v", ErrTLSFiles, files[0], files[1], err)
	}
	bundle, err := os.ReadFile(files[2])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTLSFiles, err)
	}
	pool := x509.NewCertPool()
	var names []string
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if b.Type != "CERTIFICATE" || err != nil {
			continue // as AppendCertsFromPEM skips them
		}
		pool.AddCert(c)
		names = append(names, c.Subject.String())
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: CA bundle %s holds no PEM certificate", ErrTLSFiles, files[2])
	}
	return &tlsMaterial{cert: cert, pool: pool, caFile: files[2], caNames: names}, nil
}
