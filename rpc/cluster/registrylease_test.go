package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/internal/testwait"
)

// helperEnv makes the test binary a task that registers and waits to be
// killed (see TestMain).
const helperEnv = "STARWIRE_REGISTRY_HELPER_DIR"

// helperLeaseEnv makes the helper task register with a lease.
const helperLeaseEnv = "STARWIRE_REGISTRY_HELPER_LEASE"

// TestMain runs the tests, or, in a child process startRegistered starts,
// the helper task.
func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		addrs := map[string]string{AddrGRPC: "127.0.0.1:1234"}
		err := Register(dir, "ps", 0, addrs)
		if os.Getenv(helperLeaseEnv) != "" {
			_, err = RegisterLease(dir, "ps", 0, addrs, time.Minute)
		}
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("registered\n")
		for {
			time.Sleep(time.Hour) // until killed; a bare select would be a deadlock to the runtime
		}
	}
	os.Exit(m.Run())
}

// startRegistered starts a helper task that registers ps 0 in dir, and
// returns once it has.
func startRegistered(t *testing.T, dir string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+dir), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 64)
	out.(*os.File).SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := out.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "registered") {
		t.Fatalf("the helper task did not register: %q %v", buf[:n], err)
	}
	return cmd
}

// TestKilledTaskIgnored: a task killed with SIGKILL leaves its file, but
// Wait and Lookup ignore it, saying why, and take the task's next
// registration.
func TestKilledTaskIgnored(t *testing.T) {
	if thisProcess() == nil {
		t.Skip("no /proc: processes cannot be looked up")
	}
	dir := t.TempDir()
	cmd := startRegistered(t, dir)
	// Alive, it counts.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Wait(ctx, dir, map[string]int{"ps": 1}); err != nil {
		t.Fatalf("a live task's registration: %v", err)
	}
	if a, err := Lookup(dir, "ps", 0); err != nil || a[AddrGRPC] != "127.0.0.1:1234" {
		t.Fatalf("Lookup of the live task: %v, %v", a, err)
	}
	if _, err := Lookup(dir, "worker", 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Lookup of a task never registered: %v, want ErrNotExist", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(dir, "ps.0.json")); err != nil {
		t.Fatalf("the killed task's file: %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	_, err := Wait(ctx2, dir, map[string]int{"ps": 1})
	want := "/job:ps/replica:0/task:0 (stale registration: process " + strconv.Itoa(cmd.Process.Pid) + " has ended)"
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Wait after the task was killed: %v; want ErrIncomplete naming %q", err, want)
	}
	if _, err := Lookup(dir, "ps", 0); !errors.Is(err, ErrStale) {
		t.Errorf("Lookup of the killed task: %v, want ErrStale", err)
	}
	// Restarted, the task registers again and counts.
	if err := Register(dir, "ps", 0, map[string]string{AddrGRPC: "127.0.0.1:5678"}); err != nil {
		t.Fatal(err)
	}
	r, err := Wait(ctx, dir, map[string]int{"ps": 1})
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := r.Cluster.Lookup("ps", 0); a != "127.0.0.1:5678" {
		t.Errorf("ps 0 at %s, want the restarted task's address", a)
	}
	if a, err := Lookup(dir, "ps", 0); err != nil || a[AddrGRPC] != "127.0.0.1:5678" {
		t.Errorf("Lookup of the restarted task: %v, %v; want its new address", a, err)
	}
}

// TestTaskKilledWhileWaiting: a task that registered, then died while
// Wait waited for the others, is not handed out.
func TestTaskKilledWhileWaiting(t *testing.T) {
	if thisProcess() == nil {
		t.Skip("no /proc: processes cannot be looked up")
	}
	dir := t.TempDir()
	cmd := startRegistered(t, dir)
	found, ignored := map[string]registration{}, map[string]error{}
	jobs := map[string]int{"ps": 1, "worker": 1}
	if err := scanRegistry(dir, jobs, found, ignored); err != nil || len(found) != 1 {
		t.Fatalf("scan: %v, found %v", err, found)
	}
	cmd.Process.Kill()
	cmd.Wait()
	recheck(dir, found, ignored)
	if len(found) != 0 || !errors.Is(ignored["ps.0.json"], ErrStale) {
		t.Errorf("after the kill: found %v, ignored %v", found, ignored)
	}
	// And so Wait, finding the worker, does not return the dead ps.
	if err := Register(dir, "worker", 0, map[string]string{AddrGRPC: "127.0.0.1:1000"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Wait(ctx, dir, jobs); !errors.Is(err, ErrIncomplete) {
		t.Errorf("Wait returned a cluster with a dead task: %v", err)
	}
}

// writeRegistration writes a registration file as another process would.
func writeRegistration(t *testing.T, dir string, reg registration, mtime time.Time) {
	t.Helper()
	data, err := json.Marshal(reg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, registryFile(reg.Job, reg.Task))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// TestStaleRegistrations: a lease not renewed in time, and a PID reused
// by another process, make a registration stale; a lease renewed in time,
// and a process elsewhere, do not.
func TestStaleRegistrations(t *testing.T) {
	me := thisProcess()
	if me == nil {
		t.Skip("no /proc")
	}
	elsewhere := &owner{Boot: "another machine", PIDNS: me.PIDNS, PID: 1, Start: 1}
	reused := &owner{Boot: me.Boot, PIDNS: me.PIDNS, PID: me.PID, Start: me.Start + 1}
	now := time.Now()
	for _, tc := range []struct {
		name  string
		reg   registration
		mtime time.Time
		want  string // "" for valid
	}{
		{"lease run out", registration{Owner: elsewhere, LeaseMS: 1000}, now.Add(-5 * time.Second), "not renewed for 5s (lease 1s)"},
		{"lease renewed", registration{Owner: elsewhere, LeaseMS: 1000}, now, ""},
		{"no lease, elsewhere", registration{Owner: elsewhere}, now.Add(-time.Hour), ""},
		{"no owner", registration{}, now.Add(-time.Hour), ""},
		{"PID reused", registration{Owner: reused}, now, "process " + strconv.Itoa(me.PID) + " has ended (its PID is another's now)"},
		{"this process", registration{Owner: me, LeaseMS: 60000}, now, ""},
	} {
		dir := t.TempDir()
		tc.reg.Job, tc.reg.Task, tc.reg.Addrs = "ps", 0, map[string]string{AddrGRPC: "127.0.0.1:1000"}
		writeRegistration(t, dir, tc.reg, tc.mtime)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := Wait(ctx, dir, map[string]int{"ps": 1})
		cancel()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrIncomplete naming %q", tc.name, err, tc.want)
		}
	}
}

// TestLease: the lease renews the file's time, stops when another process
// replaces the registration, and deregisters on Close. Time is the
// subject, so it runs on synctest's clock: a renewal interval passes when
// the test says, and synctest.Wait lets the renewing goroutine finish
// what that interval brought before the test looks.
func TestLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 30 * time.Millisecond
		dir := t.TempDir()
		addrs := map[string]string{AddrGRPC: "127.0.0.1:1000"}
		l, err := RegisterLease(dir, "worker", 0, addrs, lease)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "worker.0.json")
		past := time.Now().Add(-time.Hour)
		if err := os.Chtimes(path, past, past); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease / 3) // synctest's clock: one renewal interval passes
		synctest.Wait()
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.ModTime(); !got.After(past.Add(time.Minute)) {
			t.Fatalf("the file's time is %v one renewal interval later, set to %v before", got, past)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("the registration outlived Close: %v", err)
		}

		l, err = RegisterLease(dir, "worker", 0, addrs, lease)
		if err != nil {
			t.Fatal(err)
		}
		theirs := map[string]string{AddrGRPC: "127.0.0.1:2000"}
		if err := Register(dir, "worker", 0, theirs); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease / 3) // synctest's clock: one renewal interval passes
		synctest.Wait()
		if err := l.Err(); err == nil || !strings.Contains(err.Error(), "replaced by another registration") {
			t.Errorf("Err = %v one renewal interval after another's registration", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		reg, err := readRegistration(path)
		if err != nil || reg.Addrs[AddrGRPC] != theirs[AddrGRPC] {
			t.Errorf("Close removed the replacement: %v %v", reg, err)
		}
	})
}

// TestLeaseOneOwner: a second lease for a task whose registration a live
// lease holds is refused, naming the holder, and leaves the holder's
// registration as it was; once the holder's lease ran out another may take
// the task, and the first lease's Close then leaves the new registration
// alone.
func TestLeaseOneOwner(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ps.0.json")
	first, err := RegisterLease(dir, "ps", 0, map[string]string{AddrGRPC: "127.0.0.1:1000"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, err = RegisterLease(dir, "ps", 0, map[string]string{AddrGRPC: "127.0.0.1:2000"}, time.Minute)
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("second lease of a live task's registration: %v, want ErrHeld", err)
	}
	host, _ := os.Hostname()
	for _, want := range []string{TaskName("ps", 0), "pid " + strconv.Itoa(os.Getpid()), "host " + host, "since " + first.reg.Since} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if reg, err := readRegistration(path); err != nil || reg.Incarnation != first.reg.Incarnation {
		t.Fatalf("the refused lease touched the holder's registration: %+v %v", reg, err)
	}

	// The holder stops renewing (paused, or on a machine cut off): its
	// lease runs out, and a new owner takes the task.
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	second, err := RegisterLease(dir, "ps", 0, map[string]string{AddrGRPC: "127.0.0.1:2000"}, time.Minute)
	if err != nil {
		t.Fatalf("a lease of a registration whose lease ran out: %v", err)
	}
	defer second.Close()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if reg, err := readRegistration(path); err != nil || reg.Incarnation != second.reg.Incarnation {
		t.Fatalf("the first lease's Close removed the second's registration: %+v %v", reg, err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the owner's Close left its registration: %v", err)
	}
}

// TestLeaseWritesBackVanished: a live task whose registration file was
// removed (by a stray cleanup, or a second task's Close before owners were
// told apart) writes it back at its next renewal, the same registration,
// and logs that it did.
func TestLeaseWritesBackVanished(t *testing.T) {
	var logged strings.Builder
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	synctest.Test(t, func(t *testing.T) {
		const lease = 30 * time.Millisecond
		dir := t.TempDir()
		path := filepath.Join(dir, "ps.0.json")
		l, err := RegisterLease(dir, "ps", 0, map[string]string{AddrGRPC: "127.0.0.1:1000"}, lease)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease / 3) // synctest's clock: one renewal interval passes
		synctest.Wait()
		reg, err := readRegistration(path)
		if err != nil || reg.Incarnation != l.reg.Incarnation || reg.Addrs[AddrGRPC] != "127.0.0.1:1000" {
			t.Fatalf("after a renewal the registration is %+v, %v; want the lease's own back", reg, err)
		}
		if err := l.Err(); err != nil {
			t.Errorf("the lease stopped: %v", err)
		}
		if !strings.Contains(logged.String(), "vanished") || !strings.Contains(logged.String(), TaskName("ps", 0)) {
			t.Errorf("no log line says the registration was written back: %q", logged.String())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestLeaseHeldByAnotherProcess: a second owner in another process is
// refused while the first lives, naming its pid; once the first is killed
// (and not yet waited for: a zombie, as a supervisor that restarts a task
// at once may see it) the task registers again.
func TestLeaseHeldByAnotherProcess(t *testing.T) {
	if thisProcess() == nil {
		t.Skip("no /proc: processes cannot be looked up")
	}
	dir := t.TempDir()
	cmd := startRegistered(t, dir, helperLeaseEnv+"=1")
	_, err := RegisterLease(dir, "ps", 0, map[string]string{AddrGRPC: "127.0.0.1:5678"}, time.Minute)
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("a second owner of a live task's registration: %v; want ErrHeld naming pid %d", err, cmd.Process.Pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Killed, not waited for: a zombie once the kernel has ended it.
	testwait.For(t, 10*time.Second, func() byte {
		_, state, _ := processStat(cmd.Process.Pid)
		return state
	}, func(state byte) bool { return state == 'Z' }, "the killed helper to end")
	l, err := RegisterLease(dir, "ps", 0, map[string]string{AddrGRPC: "127.0.0.1:5678"}, time.Minute)
	if err != nil {
		t.Fatalf("registering after the owner was killed: %v", err)
	}
	l.Close()
}
