package testwait

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// LeakSettle bounds how long VerifyTestMain and VerifyNone wait for
// goroutines to end: a goroutine that a test's Close told to stop may
// still be on its way out when the test returns, and on a loaded machine
// (the race detector, other packages' tests beside it) its last steps can
// take seconds. A goroutine still there after LeakSettle is a leak.
const LeakSettle = 10 * time.Second

// reactors are rpc's shared TCP write reactors, which live as long as the
// process by design, wherever the package that runs them lives.
var reactors = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/starwire/starwire/rpc/tcp.(*reactor).run"),
}

// FindLeaks polls goleak.Find, with opts and the shared reactors ignored,
// until no goroutine is left over or timeout has passed, and returns
// goleak's last error (nil: none left over).
func FindLeaks(timeout time.Duration, opts ...goleak.Option) error {
	opts = append(append([]goleak.Option(nil), opts...), reactors...)
	var err error
	Until(timeout, func() bool {
		err = goleak.Find(opts...)
		return err == nil
	})
	return err
}

// VerifyTestMain runs m's tests and then, if they passed, fails the
// package (exit status 1) when goroutines other than the process's own
// outlive them for LeakSettle; opts are goleak's, for goroutines a
// package keeps by design. Unlike goleak.VerifyTestMain, which gives up
// after about a second, it waits long enough for goroutines still
// exiting on a loaded machine, and no longer than that.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := FindLeaks(LeakSettle, opts...); err != nil {
			fmt.Fprintf(os.Stderr, "testwait: goroutines left %v after the tests passed: %v\n", LeakSettle, err)
			code = 1
		}
	}
	os.Exit(code)
}

// VerifyNone fails t unless every goroutine but those opts ignore ends
// within LeakSettle. Pass goleak.IgnoreCurrent(), taken at the start of
// the test, to check only the goroutines the test started.
func VerifyNone(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	if err := FindLeaks(LeakSettle, opts...); err != nil {
		t.Fatalf("testwait: goroutines left after %v: %v", LeakSettle, err)
	}
}
