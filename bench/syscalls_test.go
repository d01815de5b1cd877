package bench

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/internal/cpuclock"
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

// cpuTime returns the user+system CPU time of this process and of the
// server process, if any. On a machine shared with other work, CPU time per
// call is steadier than wall time per call: it does not count the time the
// process waited for a core. ok is false where the server's is unreadable.
func cpuTime() (d time.Duration, ok bool) {
	t, err := cpuclock.SelfAnd(int(serverPID.Load()))
	return t.Total(), err == nil
}
