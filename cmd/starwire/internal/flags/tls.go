package flags

import (
	"cmp"
	"flag"
	"os"
	"path/filepath"

	"github.com/starwire/starwire/internal/logline"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/tasks"
)

// TLS turns on mutual TLS for a command's TCP paths (gRPC and
// starwire over TCP), from files as Kubernetes mounts a secret: a
// directory (--tls_dir, $STARWIRE_TLS_DIR) holding tls.crt, tls.key and
// ca.crt, or each file by name; a flag wins over its variable, a file
// named over the directory's.
type TLS struct {
	dir, cert, key, ca string

	files *tcp.TLSFiles // made by get
	err   error
	done  bool
}

// Register adds the flags to fs.
func (t *TLS) Register(fs *flag.FlagSet) {
	fs.StringVar(&t.dir, "tls_dir", "", "mutual TLS 1.3 on gRPC and starwire's TCP with this directory's tls.crt, tls.key and ca.crt, as a kubernetes.io/tls secret is mounted (default $"+cluster.EnvTLSDir+"; off when no file is named)")
	fs.StringVar(&t.cert, "tls_cert", "", "this process's PEM certificate, valid for the name or IP peers dial it by (default $"+cluster.EnvTLSCert+", else --tls_dir's tls.crt)")
	fs.StringVar(&t.key, "tls_key", "", "the certificate's PEM key (default $"+cluster.EnvTLSKey+", else --tls_dir's tls.key)")
	fs.StringVar(&t.ca, "tls_ca", "", "PEM bundle of the CAs peers' certificates must be signed by (default $"+cluster.EnvTLSCA+", else --tls_dir's ca.crt)")
}

// Get returns the TLS files the flags and variables name, nil when none
// are (plaintext). Every file must be named and readable; the files are
// read here, so that a bad one stops the command before it serves.
func (t *TLS) Get() (*tcp.TLSFiles, error) {
	if t.done {
		return t.files, t.err
	}
	t.done = true
	t.files, t.err = t.load()
	return t.files, t.err
}

func (t *TLS) load() (*tcp.TLSFiles, error) {
	envDir, envFiles := cluster.TLSFiles()
	dir := cmp.Or(t.dir, envDir)
	paths := [3]string{cmp.Or(t.cert, envFiles[0]), cmp.Or(t.key, envFiles[1]), cmp.Or(t.ca, envFiles[2])}
	named := dir != ""
	for i, p := range paths {
		if p != "" {
			named = true
		} else if dir != "" {
			paths[i] = filepath.Join(dir, cluster.TLSDirFiles[i])
		}
	}
	if !named {
		return nil, nil
	}
	for i, what := range []string{"--tls_cert", "--tls_key", "--tls_ca"} {
		if paths[i] == "" {
			return nil, Usagef("mutual TLS needs a certificate, its key and a CA bundle: give %s (or --tls_dir)", what)
		}
	}
	f := &tcp.TLSFiles{CertFile: paths[0], KeyFile: paths[1], CAFile: paths[2],
		Logger: logline.New(os.Stderr, "starwire: "), Hint: "--tls_dir or $" + cluster.EnvTLSDir}
	if _, err := f.Config(); err != nil {
		return nil, Usagef("%v", err)
	}
	return f, nil
}

// Secure gives the starwire transport the TLS files, when it is TCP.
func (t *TLS) Secure(cmd string, c *Transport) error {
	f, err := t.Get()
	if err != nil || f == nil {
		return PrefixUsage(cmd, err)
	}
	if tcp, ok := c.Net.(tasks.TCPNet); ok {
		tcp.TLS = f
		c.Net = tcp
	}
	return nil
}

// TLSNote says, for a status line, that the layout's TCP paths use mutual
// TLS, and where the packet path does not.
func TLSNote(l tasks.Layout) string {
	if l.TLS == nil {
		return ""
	}
	return "; mutual TLS 1.3 on gRPC and starwire over TCP (certificate " + l.TLS.CertFile + ")"
}
