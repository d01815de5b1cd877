package cpuclock

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Scheduled returns the time process pid's live threads have spent on a
// CPU, in nanoseconds from their /proc schedstat, for windows too short
// for Of's 10 ms steps. A thread that exited takes its time along, so two
// readings of a process whose threads come and go may decrease: callers
// measuring a window treat that as no figure.
func Scheduled(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("cpuclock: %w", err)
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread exited since the listing
		}
		if err != nil {
			return 0, fmt.Errorf("cpuclock: %w", err)
		}
		ns, err := parseSchedstat(b)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %w", dir, t.Name(), err)
		}
		sum += ns
	}
	return sum, nil
}

// parseSchedstat reads the first field of a thread's schedstat: its time
// on a CPU, in nanoseconds.
func parseSchedstat(b []byte) (time.Duration, error) {
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, fmt.Errorf("%w: schedstat %q", errStat, b)
	}
	ns, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: schedstat: %w", errStat, err)
	}
	return time.Duration(ns), nil
}
