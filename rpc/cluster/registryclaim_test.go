package cluster

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTogether runs RegisterLease for ps:0 in dir from n goroutines let
// go at once, and returns the leases made and the errors of the others.
func startTogether(t *testing.T, dir string, n int) (leases []*Lease, errs []error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		start = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			l, err := RegisterLease(dir, "ps", 0, map[string]string{AddrGRPC: "127.0.0.1:" + string(rune('1'+i)) + "000"}, time.Minute)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			leases = append(leases, l)
		})
	}
	close(start)
	wg.Wait()
	t.Cleanup(func() {
		for _, l := range leases {
			l.Close()
		}
	})
	return leases, errs
}

// checkOneOwner checks that of the leases started together one holds the
// task, its registration in the file, and that the rest were refused with
// ErrHeld.
func checkOneOwner(t *testing.T, dir string, leases []*Lease, errs []error) {
	t.Helper()
	if len(leases) != 1 {
		t.Fatalf("%d leases of one task started together, want 1 (refused: %v)", len(leases), errs)
	}
	for _, err := range errs {
		if !errors.Is(err, ErrHeld) {
			t.Errorf("a lease refused with %v, want ErrHeld", err)
		}
	}
	reg, err := readRegistration(filepath.Join(dir, "ps.0.json"))
	if err != nil || reg.Incarnation != leases[0].reg.Incarnation {
		t.Fatalf("the registration is %+v, %v; want the one lease's", reg, err)
	}
	if err := leases[0].Err(); err != nil {
		t.Fatalf("the lease stopped: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestLeasesStartedTogether: two serves for the same task started in the
// same instant (here 2 and 8 goroutines let go at once, many times): one
// registers, the others are refused with ErrHeld. Checking for a holder
// and then writing, all of them had found none and registered, each
// replacing the last.
func TestLeasesStartedTogether(t *testing.T) {
	for _, n := range []int{2, 8} {
		for range 50 {
			dir := t.TempDir()
			leases, errs := startTogether(t, dir, n)
			checkOneOwner(t, dir, leases, errs)
			if t.Failed() {
				return
			}
		}
	}
}

// TestLeasesTakeOverStaleTogether: leases started together for a task
// whose registration's lease ran out: one takes it over, the others are
// refused, none removes the new owner's registration.
func TestLeasesTakeOverStaleTogether(t *testing.T) {
	for range 50 {
		dir := t.TempDir()
		writeRegistration(t, dir, registration{Job: "ps", Task: 0, Addrs: map[string]string{AddrGRPC: "127.0.0.1:999"},
			Owner: thisProcess(), LeaseMS: time.Minute.Milliseconds(), Incarnation: 7}, time.Now().Add(-time.Hour))
		leases, errs := startTogether(t, dir, 4)
		checkOneOwner(t, dir, leases, errs)
		if t.Failed() {
			return
		}
	}
}

// TestLeaseTakesOverPlainRegistration: a registration made by Register,
// without a lease, is the process's own address and no lease's: a lease
// of the task replaces it.
func TestLeaseTakesOverPlainRegistration(t *testing.T) {
	dir := t.TempDir()
	if err := Register(dir, "ps", 0, map[string]string{AddrGRPC: "127.0.0.1:1000"}); err != nil {
		t.Fatal(err)
	}
	l, err := RegisterLease(dir, "ps", 0, map[string]string{AddrGRPC: "127.0.0.1:2000"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reg, err := readRegistration(filepath.Join(dir, "ps.0.json"))
	if err != nil || reg.Incarnation != l.reg.Incarnation || reg.Addrs[AddrGRPC] != "127.0.0.1:2000" {
		t.Fatalf("the registration is %+v, %v; want the lease's", reg, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ps.0.json")); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseOneOwnerWithoutHardLinks runs TestLeaseOneOwner where link(2)
// fails as on a file system without hard links: the claim, published by
// rename there, still refuses a live lease's task and takes over one
// whose lease ran out, and nothing links. (Two claims in the same instant
// may both register there; see the package's note on claims.)
func TestLeaseOneOwnerWithoutHardLinks(t *testing.T) {
	links := 0
	defer func(l func(string, string) error) { hardLink = l }(hardLink)
	hardLink = func(oldname, newname string) error {
		links++
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EPERM}
	}
	TestLeaseOneOwner(t)
	if links == 0 {
		t.Fatal("no claim tried link(2): the test ran nothing without hard links")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "worker.1.json")
	if err := createExclusive(path, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := createExclusive(path, []byte("second")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("createExclusive over an existing name without hard links: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "first" {
		t.Fatalf("the name holds %q, want the first %q", b, "first")
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, ".*")); len(tmps) != 0 {
		t.Errorf("left behind: %v", tmps)
	}
}
