package rpc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// TLSFiles configures mutual TLS from PEM files, as Kubernetes mounts a
// secret: a certificate, its key and the bundle of CAs whose certificates
// peers must present. The files are read again when they change (checked
// at most once a second, on new handshakes), so a rotated secret takes
// effect without a restart; connections already made keep their keys.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string

	once sync.Once
	r    *tlsReloader
	err  error
}

// ErrTLSFiles is wrapped by errors reading or parsing the files.
var ErrTLSFiles = errors.New("rpc: tls files")

// ServerConfig returns a config for a server that requires every client to
// present a certificate signed by one of the CAs.
func (f *TLSFiles) ServerConfig() (*tls.Config, error) {
	r, err := f.reloader()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m, err := r.load()
			if err != nil {
				return nil, err
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				Certificates: []tls.Certificate{m.cert},
				ClientCAs:    m.pool,
				ClientAuth:   tls.RequireAndVerifyClientCert,
			}, nil
		},
	}, nil
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
			return verifyServer(cs, m.pool)
		},
	}, nil
}

func verifyServer(cs tls.ConnectionState, pool *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("rpc: tls: server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		DNSName:       cs.ServerName,
		Roots:         pool,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("rpc: tls: server certificate: %w", err)
	}
	return nil
}

func (f *TLSFiles) reloader() (*tlsReloader, error) {
	f.once.Do(func() {
		f.r = &tlsReloader{files: [3]string{f.CertFile, f.KeyFile, f.CAFile}, every: time.Second}
		_, f.err = f.r.load()
	})
	return f.r, f.err
}

// tlsMaterial is what the files held when last read.
type tlsMaterial struct {
	cert tls.Certificate
	pool *x509.CertPool
}

type tlsReloader struct {
	files [3]string     // cert, key, CA
	every time.Duration // between looks at the files

	mu      sync.Mutex
	cur     *tlsMaterial
	stamp   [3]time.Time
	checked time.Time
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
			return r.keep(fmt.Errorf("%w: %v", ErrTLSFiles, err))
		}
		stamp[i] = st.ModTime()
	}
	if r.cur != nil && stamp == r.stamp {
		return r.cur, nil
	}
	m, err := readTLSMaterial(r.files)
	if err != nil {
		return r.keep(err)
	}
	r.cur, r.stamp = m, stamp
	return m, nil
}

func (r *tlsReloader) keep(err error) (*tlsMaterial, error) {
	if r.cur != nil {
		return r.cur, nil
	}
	return nil, err
}

func readTLSMaterial(files [3]string) (*tlsMaterial, error) {
	cert, err := tls.LoadX509KeyPair(files[0], files[1])
	if err != nil {
		return nil, fmt.Errorf("%w: certificate %s, key %s: %v", ErrTLSFiles, files[0], files[1], err)
	}
	pem, err := os.ReadFile(files[2])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTLSFiles, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: CA bundle %s holds no PEM certificate", ErrTLSFiles, files[2])
	}
	return &tlsMaterial{cert: cert, pool: pool}, nil
}
