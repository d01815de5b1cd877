package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// ioCounts are the process's read- and write-type system calls so far,
// from /proc/self/io; throughput on this machine follows frames per system
// call, so the benchmarks report these per call. ok is false where the file
// is missing (no /proc, or a kernel without task I/O accounting).
type ioCounts struct {
	reads, writes int64
	ok            bool
}

func readIOCounts() ioCounts {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return ioCounts{}
	}
	var c ioCounts
	sc := bufio.NewScanner(bytes.NewReader(b))
	seen := 0
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(": "))
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			continue
		}
		switch string(k) {
		case "syscr":
			c.reads, seen = n, seen+1
		case "syscw":
			c.writes, seen = n, seen+1
		}
	}
	c.ok = seen == 2
	return c
}

// serverPID is the pid of a server process the benchmark runs against
// (0: none), whose CPU time counts with this process's.
var serverPID atomic.Int64

// clockTick is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on
// every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// cpuTime returns the user+system CPU time of this process and of the
// server process, if any. On a machine shared with other work, CPU time per
// call is steadier than wall time per call: it does not count the time the
// process waited for a core. ok is false where /proc is unreadable.
func cpuTime() (d time.Duration, ok bool) {
	d, ok = procCPU("self")
	if pid := serverPID.Load(); pid != 0 && ok {
		sd, sok := procCPU(strconv.FormatInt(pid, 10))
		d, ok = d+sd, sok
	}
	return d, ok
}

func procCPU(pid string) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%s/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces; the fields after it do not.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	// After the name: state is field 3, utime 14, stime 15 (1-based).
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * clockTick, true
}
