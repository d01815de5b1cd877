// Package cpuclock reads the CPU time processes have used, for benchmarks
// that report CPU per operation: on a machine shared with other work it is
// steadier than wall time, since it does not count time spent waiting for
// a core.
package cpuclock

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Times are the CPU times of a process: User in its own code, System in
// the kernel on its behalf (system calls, and for a packet sender the
// receive path its transmit drives).
type Times struct{ User, System time.Duration }

// Total returns User + System.
func (t Times) Total() time.Duration { return t.User + t.System }

// Add returns t + u.
func (t Times) Add(u Times) Times { return Times{t.User + u.User, t.System + u.System} }

// Sub returns t - u.
func (t Times) Sub(u Times) Times { return Times{t.User - u.User, t.System - u.System} }

// Self returns the CPU times of this process.
func Self() Times {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return Times{User: time.Duration(ru.Utime.Nano()), System: time.Duration(ru.Stime.Nano())}
}

// SelfAnd returns the CPU times of this process plus those of process pid,
// a server a benchmark runs against (none when pid is 0). When pid's cannot
// be read it returns this process's alone, and the error.
func SelfAnd(pid int) (Times, error) {
	t := Self()
	if pid == 0 {
		return t, nil
	}
	o, err := Of(pid)
	return t.Add(o), err
}

// clockTick is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on
// every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// errStat is wrapped when /proc/PID/stat does not read as expected.
var errStat = errors.New("cpuclock: unexpected /proc stat format")

// Of returns the CPU times of process pid, from /proc, in steps of 10ms.
func Of(pid int) (Times, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Times{}, fmt.Errorf("cpuclock: %w", err)
	}
	return parseStat(b)
}

func parseStat(b []byte) (Times, error) {
	// The command name may hold spaces and parentheses; the fields after
	// its last ')' do not.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Times{}, errStat
	}
	f := bytes.Fields(b[i+1:])
	// After the name: state is field 3, utime 14, stime 15 (1-based).
	if len(f) < 13 {
		return Times{}, errStat
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return Times{}, fmt.Errorf("%w: %w", errStat, errors.Join(err1, err2))
	}
	return Times{User: time.Duration(ut) * clockTick, System: time.Duration(st) * clockTick}, nil
}
