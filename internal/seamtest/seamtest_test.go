package seamtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// TestEveryCapabilityKnown: every exported interface the seam's files
// declare is one CheckForwards checks, so that a capability added there
// and forgotten here fails.
func TestEveryCapabilityKnown(t *testing.T) {
	// Exported types of those files that are no capability.
	notCapabilities := map[string]string{
		"rpc.Withdrawal": "the answer of Withdraw",
	}
	known := map[string]bool{}
	for _, c := range capabilities {
		known[c.t.String()] = true
	}
	for pkg, file := range map[string]string{"rpc": "../../rpc/capabilities.go", "readside": "../readside/readside.go"} {
		for _, name := range exportedTypes(t, file) {
			q := pkg + "." + name
			if _, ok := notCapabilities[q]; ok {
				continue
			}
			// rpc.Throttle is wire.Throttle, an alias.
			if !known[q] && !(q == "rpc.Throttle" && known["wire.Throttle"]) {
				t.Errorf("%s declares %s, which CheckForwards does not check", file, q)
			}
		}
	}
}

// exportedTypes returns the names of the exported types file declares.
func exportedTypes(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			if ts := s.(*ast.TypeSpec); ts.Name.IsExported() {
				out = append(out, ts.Name.Name)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s declares no exported type", file)
	}
	return out
}

// recorder is a testing.TB that keeps what CheckForwards reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// A conn offering ProgressConn and a read side it may lend, and wrappers
// of it that forward both, drop the progress, or switch self-reading off.
type baseConn struct{ reading bool }

func (baseConn) Send(*wire.Message) error                  { return nil }
func (baseConn) Receive(wire.Receiver) error               { return rpc.ErrClosed }
func (baseConn) Close() error                              { return nil }
func (baseConn) LocalAddr() net.Addr                       { return nil }
func (baseConn) RemoteAddr() net.Addr                      { return nil }
func (baseConn) Progress() (in, out uint64)                { return 1, 2 }
func (c baseConn) SelfReading() bool                       { return c.reading }
func (baseConn) Answers(string) bool                       { return true }
func (baseConn) ReadTurn(wire.Receiver) error              { return nil }
func (baseConn) Interrupt()                                {}
func (baseConn) ResumeReads()                              {}
func (baseConn) WholeLimit() uint64                        { return 0 }
func (baseConn) Leave() bool                               { return false }
func (baseConn) Check() error                              { return nil }
func (baseConn) Fail(err error) error                      { return err }
func (baseConn) ReadTurnUntil(wire.Receiver) (bool, error) { return false, nil }

type forwards struct{ baseConn }

type dropsProgress struct {
	rpc.Conn
	readside.Reader
}

type noSelfRead struct{ baseConn }

func (noSelfRead) SelfReading() bool { return false }

var (
	_ rpc.ProgressConn = baseConn{}
	_ readside.Reader  = baseConn{}
)

func TestCheckForwards(t *testing.T) {
	inner := baseConn{reading: true}
	progress := Dropping[rpc.ProgressConn]("a test's wrapper")
	for _, tc := range []struct {
		name    string
		wrapper any
		drops   []Drop
		want    []string // what each error says, in order
	}{
		{"forwards", forwards{inner}, nil, nil},
		{"drops", dropsProgress{inner, inner}, nil, []string{"drops rpc.ProgressConn, which the seamtest.baseConn it wraps offers"}},
		{"drops, excused", dropsProgress{inner, inner}, []Drop{progress}, nil},
		{"excused but forwards", forwards{inner}, []Drop{progress}, []string{"is said to drop rpc.ProgressConn, but it forwards it"}},
		{"excused without why", dropsProgress{inner, inner}, []Drop{Dropping[rpc.ProgressConn](" ")}, []string{"without saying why"}},
		{"no capability", forwards{inner}, []Drop{Dropping[rpc.Conn]("not one")}, []string{"which is no capability of the seam"}},
		{"switched off", noSelfRead{inner}, nil, []string{"offers readside.Reader switched off"}},
		{"switched off, excused", noSelfRead{inner}, []Drop{Dropping[readside.Reader]("its records")}, nil},
		{"nothing", struct{ rpc.Conn }{inner}, []Drop{progress}, []string{"drops readside.Reader"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			CheckForwards(r, tc.wrapper, inner, tc.drops...)
			if len(r.errs) != len(tc.want) {
				t.Fatalf("errors %q, want %d: %q", r.errs, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(r.errs[i], w) {
					t.Errorf("error %q does not say %q", r.errs[i], w)
				}
			}
		})
	}
	// An inner whose read side is off may be wrapped by one whose is off.
	r := &recorder{TB: t}
	CheckForwards(r, noSelfRead{}, baseConn{})
	if len(r.errs) != 0 {
		t.Errorf("an inner not self-reading: errors %q, want none", r.errs)
	}
}

// TestReceivers: the core's receivers offer what rpc and readside say
// they do (a client's lends and says whom it woke; a server's throttles,
// says whom it woke and hears of plaintext clients), so the wrappers
// checked against them are checked against what the core offers.
func TestReceivers(t *testing.T) {
	client, server := Receivers(t)
	for _, tc := range []struct {
		name string
		r    wire.Receiver
		want []string
	}{
		{"client", client, []string{"readside.Lender", "readside.Waker"}},
		{"server", server, []string{"wire.Throttle", "rpc.PlaintextWatcher", "readside.Waker"}},
	} {
		var got []string
		for _, c := range capabilities {
			if has, _ := c.offered(tc.r); has {
				got = append(got, c.t.String())
			}
		}
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("the %s's receiver (%T) offers %q, want %q", tc.name, tc.r, got, tc.want)
		}
	}
}
